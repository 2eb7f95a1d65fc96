"""Counting BMv2's per-pass work from a trace log (mininet_topos/network/bmv2_trace.py)."""

from __future__ import annotations

import pytest

from mininet_topos.network.bmv2_trace import passes, summary

pytestmark = pytest.mark.unit


def line(thread: int, message: str) -> str:
    return f"[16:01:02.003] [bmv2] [D] [thread {thread}] [7.0] [cxt 0] {message}"


# two threads interleave: the ingress pass of a barrier packet (thread 1) and an egress pass
# (thread 2); lines outside a pass and foreign lines are ignored
TRACE = [
    "Adding interface sw1 as port 1",
    line(1, "Processing packet received on port 7"),
    line(1, "Pipeline 'ingress': start"),
    line(1, "Applying table 'tbl_netcoll45'"),
    line(2, "Pipeline 'egress': start"),
    line(1, 'p4src/v1model/netcoll.p4(22) Condition "port >= 1 && port < 32" (node_3) is true'),
    line(2, "Applying table 'tbl_netcoll22_1'"),
    line(1, 'p4src/common/ingress.p4(41) Condition "meta.class == CLASS_MCAST" (node_73) is false'),
    line(
        1, 'p4src/common/ingress.p4(46) Condition "meta.class == CLASS_BARRIER" (node_81) is true'
    ),
    line(2, "p4src/v1model/netcoll.p4(22) Primitive port >= 1 ? 1 : 0"),
    line(1, "p4src/v1model/netcoll.p4(45) Primitive meta.in_port = (port_num_t) sm.ingress_port"),
    line(1, "Primitive (no source info)"),
    line(2, "Pipeline 'egress': end"),
    line(1, "Pipeline 'ingress': end"),
    line(1, "Applying table 'after_the_pass'"),
]


def test_each_pass_is_followed_by_its_thread_and_classed_by_its_true_class_test() -> None:
    found = passes(TRACE)
    assert [(p.pipeline, p.klass) for p in found] == [("egress", "-"), ("ingress", "CLASS_BARRIER")]
    assert found[0].counts == {"tables": 1, "conditions": 0, "primitives": 1}
    assert found[1].counts == {"tables": 1, "conditions": 3, "primitives": 2}


def test_the_summary_puts_ingress_first_with_mean_counts() -> None:
    rows = summary(passes(TRACE + TRACE))
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("ingress", "CLASS_BARRIER", 2),
        ("egress", "-", 2),
    ]
    assert rows[0][3] == {"tables": 1.0, "conditions": 3.0, "primitives": 2.0}
