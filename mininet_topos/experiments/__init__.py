"""What runs on a network: ``smoke`` (is it up), ``launch`` (one workload), ``bench`` (side-by-side
timings), ``reproduce/`` (each paper's experiment, one module per paper), ``reliability/`` (the
fault matrix), with ``measure`` (link bytes, CPU) and ``provenance`` (commit, protocol hash)."""
