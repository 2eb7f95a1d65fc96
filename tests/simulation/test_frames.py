"""Frames of the links' MTU: hosts cut messages into MTU less netcoll's header, as the agents
do (Mininet's links carry 9000-byte frames). Its own module: ns-3 has one simulator per
process, so no other module's network may be alive while this one builds its own."""

from __future__ import annotations

from controller.topology_build import parse_spec
from mininet_topos.ns3sim.accounting import predicted_link_bytes
from mininet_topos.ns3sim.network import LinkParams
from mininet_topos.ns3sim.simulation import Simulation


def test_jumbo_frames_carry_a_message_in_fewer_larger_segments() -> None:
    """At MTU 9000 (Mininet's links) a 20000-byte broadcast is 3 segments of up to 8960 bytes
    on each of the 17 links, not 14 of 1460; the link bytes are still what routes and trees
    predict for segments of that size."""
    sim = Simulation(parse_spec("df:2,2,1"), LinkParams(mtu=9000), seed=7, progress_every=0)
    try:
        outcome = sim.run("bcast", "innet", 20000, root=0)
        assert outcome.wrong == 0
        assert outcome.packets == 3 * (1 + 5 + 11)
        predicted = predicted_link_bytes(
            sim.topo, sim.members, sim.transport.traffic, sim.transport.tree_cache, 8960
        )
        assert dict(predicted) == outcome.per_link
        assert sim.run("scatter", "tree", 1000, root=5).wrong == 0
    finally:
        sim.close()
