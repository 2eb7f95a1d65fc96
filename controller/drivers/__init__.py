"""Drivers that push desired switch state.

P4Runtime for tables and multicast groups, mini packets for registers.
"""
