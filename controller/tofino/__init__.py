"""Tofino (TNA) support: the build checks (:mod:`.build`) and the BfRt mapping of the desired
switch state (:mod:`.bfrt`). docs/porting-to-tofino.md explains the port."""
