"""The network side of netcoll, one room per concern.

- ``network/``: the Mininet network of BMv2 switches and its bring-up (``make run``).
- ``links/``: link models and faults (the seeded emulator, impairments).
- ``experiments/``: what runs on a network: smoke, launch, bench, reproduce, reliability.
- ``ns3sim/``: the same collectives on an ns-3 dragonfly (``make simulate``).
- ``tooling/``: the run registry and ``make stop``, ``make deps`` and ``make doctor``.

The modules at this level (``run``, ``smoke``, ``launch``, ``bench``, ``reproduce``,
``reliability``, ``stop``, ``environment``) are only the ``python -m mininet_topos.X`` entry
points the Makefile calls; each hands over to its room. docs/architecture.md walks the rooms.
"""
