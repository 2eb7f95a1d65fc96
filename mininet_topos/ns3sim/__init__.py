"""Simulation back end on ns-3: the controller's dragonfly, routes and trees, and the host agents'
own collective algorithms, run against a transport on ns-3 sockets and simulated time.

``make simulate`` (``python -m mininet_topos.ns3sim``); docs/scale.md describes it.
"""
