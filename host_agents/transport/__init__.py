"""The host transport, one module per protocol; :class:`host_agents.engine.Engine` runs them.

Protocols: ``unicast``; ``multicast_root`` and ``multicast_receiver`` (acknowledged multicast);
``aggregation`` (co-roots merging their group's ACKs and NACKs); ``publish`` (multicast without
ACKs, its repair and the pacing of repair requests); ``barrier``; ``probes`` (PING/PONG).

Shared pieces: ``keys`` (typed message names), ``messages`` (Source, Incoming, segment
arithmetic), ``feedback`` (ACK and NACK bodies), ``rtt``, ``config`` (EngineConfig,
EngineStats, errors), ``endpoint`` (what a protocol needs from the engine), ``inbox`` and
``early`` (messages being received, and the budgets of those nobody asked for yet).
"""
