"""Which switch a host hangs off: the one its barrier ARRIVEs and REDUCEs go to, and the one a
PeerTimeout names when that switch does not answer (transport/arrive_resends.py,
transport/switch_reduce.py)."""

from __future__ import annotations

from host_agents.transport.endpoint import Endpoint


def own_switch(endpoint: Endpoint) -> int:
    """The switch this host hangs off (0 when the directory does not place it)."""
    directory = endpoint.directory
    return directory.switch_of(endpoint.node) if endpoint.node in directory.places else 0
