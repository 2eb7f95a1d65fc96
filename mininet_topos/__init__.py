"""The network side of netcoll, one room per concern (docs/architecture.md walks them):

- ``network/``: the Mininet network of BMv2 switches and its bring-up (``make run``).
- ``links/``: link models and faults (the seeded link emulator, impairments).
- ``experiments/``: what runs on a network: smoke, launch, bench, reproduce/, reliability/.
- ``ns3sim/``: the same collectives on an ns-3 dragonfly (``make simulate``).
- ``tooling/``: the run registry, ``make stop``, ``make deps`` and ``make doctor``.
"""
