"""The host transport, one module per protocol; :mod:`host_agents.engine` runs them.

``keys`` (typed message names), ``messages`` (Source, Incoming, segment arithmetic),
``feedback`` (ACK and NACK bodies), ``config`` (EngineConfig, EngineStats, errors), ``rtt``,
``endpoint`` (what a protocol needs from the engine), ``inbox`` and ``early`` (messages being
received), ``unicast``, ``multicast_root``, ``multicast_receiver``, ``aggregation``
(co-roots), ``publish`` (unacknowledged multicast, its repair and the pacing of repair
requests), ``barrier``.
"""
