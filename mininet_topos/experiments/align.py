"""How far ahead rank 0 sets an aligned start (``CollectiveTest.align_lead_s``): further than
its binomial broadcast of the start time can take to reach every rank on the links of the run.

The agents' default lead, a quarter of a second, covers 72 agents woken on two cores over
unshaped links. On the papers' links slowed 200,000-fold a link is 20 ms long and a small
frame takes another 9 ms to send, and the broadcast's seven rounds took about 0.6 s: the ranks
learnt the start time up to 0.35 s late and started then, which a first-start-to-last-end time
counted against the collective (the in-network 4 B allreduce's 581 ms held 320 ms of it)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace

from controller import routing
from controller.topology import Topology
from host_agents.workload import ALIGN_LEAD_MAX_S, ALIGN_LEAD_S, CollectiveTest
from mininet_topos.links.shaping import GLOBAL, LinkModel, transmission_time

# the start time's message as sent (collective header and payload, rounded up)
START_FRAME_BYTES = 256
# the bound below covers the longest path on every round; queues and the agents' turns on
# the cores come on top of it
MARGIN = 1.5


def diameter(topo: Topology, members: Sequence[int]) -> int:
    """The most links a unicast between two of ``members`` traverses (one host per switch
    stands for all of its hosts: they share its paths)."""
    by_switch = {topo.host_by_node(m).switch: m for m in members}
    hosts = list(by_switch.values())
    if len(members) > 1 and len(hosts) == 1:
        return 2  # host, switch, host
    return max(
        (routing.host_path_hops(topo, a, b) for a, b in itertools.combinations(hosts, 2)),
        default=0,
    )


def align_lead(links: LinkModel, ranks: int, path_links: int) -> float:
    """Seconds ahead to set an aligned start: the default lead, plus, on shaped or delayed
    links, ``MARGIN`` times a binomial broadcast's rounds over ``path_links`` of the slowest
    kind of link each."""
    if not links.shaped and not links.delayed:
        return ALIGN_LEAD_S
    per_link = 0.0
    for kind in ("host", GLOBAL):
        rate = links.rate_of(kind)
        sending = transmission_time(START_FRAME_BYTES, rate) if rate else 0.0
        per_link = max(per_link, links.delay_of(kind) + sending)
    rounds = math.ceil(math.log2(max(ranks, 2)))
    return min(ALIGN_LEAD_S + MARGIN * rounds * path_links * per_link, ALIGN_LEAD_MAX_S)


def with_lead(tests: Sequence[CollectiveTest], lead: float) -> list[CollectiveTest]:
    """The tests, each aligned one given ``lead``."""
    return [replace(t, align_lead_s=lead) if t.aligned else t for t in tests]
