"""The lead of an aligned start (mininet_topos/experiments/align.py): the agents' default on
unshaped links, and on dilated links longer than rank 0's binomial broadcast of the start time
can take; before, a fixed quarter of a second let ranks learn the time 0.35 s late at
200,000-fold and start then, counted against the collective."""

from __future__ import annotations

import pytest

from controller import topology_build
from host_agents.workload import ALIGN_LEAD_MAX_S, ALIGN_LEAD_S, CollectiveTest
from mininet_topos.experiments.align import align_lead, diameter, with_lead
from mininet_topos.links.dilation import PAPERS
from mininet_topos.links.shaping import LinkModel

pytestmark = pytest.mark.unit


def test_unshaped_links_keep_the_agents_default() -> None:
    assert align_lead(LinkModel(), 72, 5) == ALIGN_LEAD_S


def test_the_dilated_papers_links_get_longer_than_the_broadcast_took() -> None:
    links = PAPERS["df-scatter"].dilated(200_000)
    lead = align_lead(links, 72, 5)
    # measured there: the ranks learnt a quarter-second-ahead time up to 0.35 s late, so the
    # broadcast took about 0.6 s
    assert lead > 0.6 + ALIGN_LEAD_S
    assert lead < 5.0  # not so long that it dominates the cells' wall time
    # twice as slow, twice the link part
    slower = align_lead(PAPERS["df-scatter"].dilated(400_000), 72, 5)
    assert slower - ALIGN_LEAD_S == pytest.approx(2 * (lead - ALIGN_LEAD_S), rel=0.01)
    assert align_lead(links, 8, 5) < lead  # fewer ranks, fewer rounds


def test_the_diameter_is_the_longest_host_path_among_the_members() -> None:
    topo = topology_build.parse_spec("df:2,4,2")
    everyone = [h.node_id for h in topo.hosts]
    assert diameter(topo, everyone) == 5  # host, local, global, local, host
    first = topo.hosts[0]
    neighbour = next(h for h in topo.hosts if h.switch == first.switch and h is not first)
    assert diameter(topo, [first.node_id, neighbour.node_id]) == 2
    assert diameter(topo, [first.node_id]) == 0


def test_only_aligned_tests_get_the_lead_and_bad_leads_are_refused() -> None:
    aligned = CollectiveTest("bcast", "innet", (4,), aligned=True)
    plain = CollectiveTest("bcast", "innet", (4,))
    led = with_lead([aligned, plain], 1.5)
    assert led[0].align_lead_s == 1.5 and led[1].align_lead_s == ALIGN_LEAD_S
    for bad in (0.0, -1.0, ALIGN_LEAD_MAX_S + 1):
        with pytest.raises(ValueError, match="align_lead_s"):
            CollectiveTest("bcast", aligned=True, align_lead_s=bad)
