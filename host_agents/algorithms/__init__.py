"""Collective algorithms, one module per collective, each algorithm a coroutine over a
:class:`host_agents.context.CollectiveContext` (and nothing else of the agent).

Which algorithms exist, what they need and which one ``auto`` picks is data in
:mod:`host_agents.collectives`.
"""
