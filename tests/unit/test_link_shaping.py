"""The link model: which tc lines shape which interface, for every kind of link."""

from __future__ import annotations

import pytest

from controller import topology_build as model
from mininet_topos.links.dilation import PAPERS, Calibration, choose_factor, round_up_125
from mininet_topos.links.shaping import LinkModel, batch_by_node, link_ends, tc_commands
from mininet_topos.links.units import LinkParameterError

pytestmark = pytest.mark.unit


def test_unshaped_is_the_default_and_shapes_nothing() -> None:
    links = LinkModel()
    assert not links.shaped and not links.delayed
    topo = model.parse_spec("df:2,2,1")
    assert batch_by_node(link_ends(topo), links, 1500, netem=False) == {}


def test_both_ends_of_every_link_are_shaped_and_the_management_link_is_not() -> None:
    topo = model.parse_spec("df:2,4,2")
    ends = link_ends(topo)
    # 72 host links, 54 local and 36 global, two ends each
    assert len(ends) == 2 * (72 + 54 + 36)
    assert len({e.intf for e in ends}) == len(ends)
    assert not any(e.node == topo.management.name for e in ends)
    batches = batch_by_node(ends, LinkModel(rate=10, global_rate=5), 9000, netem=False)
    hosts = [node for node in batches if node is not None]
    assert len(hosts) == 72
    root = batches[None]
    # every switch port of a host, local or global link: one HTB root, class and FIFO each
    assert sum(" root handle 5: htb" in line for line in root) == 72 + 2 * (54 + 36)
    global_ports = {e.intf for e in ends if e.kind == "global"}
    for line in root:
        if " classid 5:1 " in line:
            intf = line.split(" dev ")[1].split()[0]
            assert ("rate 5000kbit" in line) == (intf in global_ports), line


def test_a_rate_gives_htb_with_a_one_frame_burst_and_a_packet_queue() -> None:
    lines = tc_commands("ncs0-eth1", 10.0, 0.0, 64, 1500, netem=False)
    assert lines == [
        "qdisc replace dev ncs0-eth1 root handle 5: htb default 1",
        "class replace dev ncs0-eth1 parent 5: classid 5:1 htb rate 10000kbit burst 1514 "
        "cburst 1514 quantum 1514",
        "qdisc replace dev ncs0-eth1 parent 5:1 handle 10: pfifo limit 64",
    ]


def test_a_delay_goes_to_netem_only_where_the_kernel_has_it() -> None:
    with_netem = tc_commands("x", 10.0, 2e-3, 100, 1500, netem=True)
    assert with_netem[-1].endswith("netem delay 2000us rate 10000kbit limit 100")
    without = tc_commands("x", 10.0, 2e-3, 100, 1500, netem=False)
    assert "netem" not in " ".join(without)  # the link emulator adds it instead
    assert tc_commands("x", None, 2e-3, 100, 1500, netem=True) == [
        "qdisc replace dev x root handle 10: netem delay 2000us limit 100"
    ]


def test_global_links_take_their_own_rate_and_delay_or_the_others() -> None:
    links = LinkModel(rate=10, delay=1e-3)
    assert links.rate_of("global") == 10 and links.delay_of("global") == 1e-3
    links = LinkModel(rate=10, global_rate=4, delay=1e-3, global_delay=5e-3)
    assert links.rate_of("global") == 4 and links.rate_of("host") == 10
    assert links.delay_of("global") == 5e-3 and links.delay_of("local") == 1e-3
    assert "global links 4Mb/s 5ms" in links.describe()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rate": 0}, "--rate"),
        ({"rate": 10, "global_rate": 1e9}, "--global-rate"),
        ({"global_rate": 5}, "--global-rate without --rate"),
        ({"rate": 10, "queue": 0}, "--queue"),
        ({"delay": -1.0}, "--delay"),
    ],
)
def test_link_options_out_of_range_are_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(LinkParameterError, match=match):
        LinkModel(**kwargs)  # type: ignore[arg-type]


def test_dilation_keeps_the_papers_proportions() -> None:
    paper = PAPERS["df-scatter"]
    links = paper.dilated(10_000)
    assert links.rate == pytest.approx(4.51)
    assert links.global_rate == pytest.approx(4.04)
    assert links.delay == pytest.approx(1e-3)
    assert links.rate / links.global_rate == pytest.approx(45.1 / 40.4)
    with pytest.raises(LinkParameterError, match="choose a factor"):
        paper.dilated(1e9)
    with pytest.raises(LinkParameterError, match="at least 1"):
        paper.dilated(0.5)


def test_the_factor_brings_the_heaviest_cell_under_the_cpu_target() -> None:
    # 125 ms of CPU per operation; 5 us per operation at the paper's rates; 2 cores
    factor = choose_factor(0.125, 5e-6, 2)
    assert factor == 50_000  # 31,250 rounded up to 1-2-5
    assert 0.125 / (2 * 5e-6 * factor) <= 0.4
    assert [round_up_125(v) for v in (0.3, 1, 1.5, 3, 7, 10, 11)] == [1, 1, 2, 5, 10, 10, 20]


def test_a_pilot_run_calibrates_the_factor() -> None:
    # the pilot ran at 10,000x and took 50 ms per operation: 5 us at the paper's rates
    cal = Calibration("df-scatter", 10_000, "bcast 16384 binomial", 0.125, 0.05, 2, "fast")
    assert cal.paper_time_per_op_s == pytest.approx(5e-6)
    assert cal.factor == 50_000


def test_the_emulator_holds_each_frame_for_its_serialisation_one_after_another() -> None:
    """HTB lets a burst through at once; a wire does not: at 451 kb/s a 9014-byte frame
    takes 160 ms, and two frames arriving together leave 160 and 320 ms later."""
    import socket

    from mininet_topos.links.linkemu import Direction
    from mininet_topos.links.linkfaults import Impairment, LinkFaults

    faults = LinkFaults("seed:link:ab", Impairment(delay=0.01, rate_mbit=0.451), 0.0)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        direction = Direction("link", sock, faults)
        first, second = direction.departure(0.0, 9014), direction.departure(0.0, 9014)
        assert (first, second) == (pytest.approx(0.1599, abs=1e-4), pytest.approx(0.3198, abs=1e-4))
        # an idle link: the next frame waits only for itself
        assert direction.departure(5.0, 64) == pytest.approx(5.0 + 64 * 8 / 451e3)
        faults.apply(Impairment(delay=0.01), 6.0)  # no rate: straight through
        assert direction.departure(6.0, 9014) == 6.0


def test_a_relayed_shaped_link_keeps_its_rate_and_delay_under_faults() -> None:
    from mininet_topos.links.bringup import LinkPlan
    from mininet_topos.links.linkfaults import Impairment

    plan = LinkPlan(LinkModel(rate=10, global_rate=2, delay=1e-3), relay_delays=True)
    lossy = plan.with_base_delay(Impairment(loss=0.01), "global")
    assert (lossy.loss, lossy.delay, lossy.rate_mbit) == (0.01, 1e-3, 2.0)
    assert plan.with_base_delay(Impairment(), "host").rate_mbit == 10.0
