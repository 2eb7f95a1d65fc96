"""Issue 33: a reduction frame lost anywhere costs about one resend, not one per waiting rank.

On the in-process fabric (the switches are controller/switch_model.py, the reference of the
P4) with 72 ranks on Df(2,4,2), one chosen frame is lost per allreduce of 8 chunks: a REDUCE
from one host, a REDUCE between switches, a RESULT between switches, a RESULT to one host.
Before the fix every rank that missed a result resent: all 72 for a lost REDUCE (the next
chunks' results overtook the missing one everywhere), a whole subtree for a RESULT lost
between switches. Now the ranks resend in member order and the switches ask the host whose
part is missing (common/reduce.p4 agg_repair; docs/protocol.md, Reduction repairs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from controller import wire
from controller.topology_build import dragonfly
from host_agents.collectives import Call
from host_agents.engine import EngineConfig
from tests.fabric import Cluster, LinkKey
from tests.loss_plans import Chooser, OneLossPerEpoch, resends_per_epoch

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 4, 2)
HOSTS = tuple(h.node_id for h in TOPO.hosts)
HOST_PORTS = {(h.switch, h.port) for h in TOPO.hosts}
CHUNKS = 8  # a loss in the middle is overtaken by later ones
NBYTES = CHUNKS * wire.AGG_LANES * 4
# Timers well above what 72 engines in one process take for a lossless allreduce on a busy
# machine, so only losses make anyone resend
TIMERS = EngineConfig(barrier_rto=1.0, reduce_rto_max=4.0, reduce_stagger=0.05)


def between_switches(link: LinkKey) -> bool:
    return link[0] >= 0 and link not in HOST_PORTS


def lose(op: int, chunk: int, where: Callable[[LinkKey], bool], src: int = 0) -> Chooser:
    """Chunk ``chunk`` of an instance (chunk numbers continue from one instance to the next,
    modulo the window: an instance starts at a multiple of CHUNKS)."""
    return lambda link, hdr: (
        hdr.op == op and hdr.seg_idx % CHUNKS == chunk and where(link) and src in (0, hdr.src_node)
    )


def to_host(node: int) -> Callable[[LinkKey], bool]:
    host = TOPO.host_by_node(node)
    return lambda link: link == (host.switch, host.port)


def allreduces_under(plan: dict[int, Chooser], epochs: int, counter: str) -> dict[int, int]:
    """``epochs`` in-network allreduces, one frame lost per epoch by ``plan`` (first sends
    only), every loss checked to have happened: how much ``counter`` grew in each."""
    drop_if = OneLossPerEpoch(plan, first_sends_only=True)
    counts = resends_per_epoch(
        TOPO,
        HOSTS,
        TIMERS,
        drop_if,
        epochs,
        counter,
        lambda comm: comm.run("allreduce", Call(bytes(NBYTES), 0, NBYTES), algorithm="innet"),
    )
    drop_if.assert_every_loss_happened()
    return counts


def test_one_lost_reduction_frame_costs_about_one_resend() -> None:
    plan: dict[int, Chooser] = {
        # epoch 1 waits for every engine to start
        2: lose(wire.Op.REDUCE, 2, lambda link: link[0] < 0, src=HOSTS[5]),
        3: lose(wire.Op.REDUCE, 3, between_switches),
        4: lose(wire.Op.RESULT, 1, between_switches),
        5: lose(wire.Op.RESULT, 4, to_host(HOSTS[7])),
        # a late member that lost an early RESULT holds every later chunk (it sends chunk
        # c + 4 only once it has c's result): asked for one it has not sent, it resends the
        # one it waits for at once, not in its turn after 70 others
        6: lose(wire.Op.RESULT, 1, to_host(HOSTS[70])),
    }
    resends = allreduces_under(plan, 7, "reduce_retransmissions")
    # a REDUCE lost on a host's link or between switches: the first member's resend, and the
    # asked host's (or the asked switch sends its part up again)
    assert resends[2] <= 2, resends
    assert resends[3] <= 2, resends
    # a RESULT lost between switches: the first member below resends, its switch answers
    assert resends[4] <= 2, resends
    # a RESULT lost on its way to one host: its own resend
    assert resends[5] <= 1, resends
    # the late member's RESULT: the first member's resends of the chunks held (it asks the
    # late member) and the late member's own
    assert resends[6] <= 4, resends
    assert resends[1] == resends[7] == 0, resends


def test_the_resend_order_follows_the_tree() -> None:
    """The communicator's first member resends first; then each group's, each switch's first
    member, then the others: a subtree's first member before the rest of it."""

    async def main() -> dict[int, int]:
        cluster = Cluster(TOPO, HOSTS, loop=asyncio.get_running_loop(), config=TIMERS)
        return {c.rank: c.engine._switch_reduce.turns(1) for c in cluster.comms}

    turns = asyncio.run(main())
    by_place: dict[int, list[int]] = {}
    for rank, node in enumerate(HOSTS):
        host = TOPO.host_by_node(node)
        by_place.setdefault(TOPO.switches[host.switch].group, []).append(rank)
    assert turns[0] == 0
    groups = list(by_place.values())
    assert all(turns[g[0]] == 1 for g in groups[1:]), turns
    assert sorted(turns.values()).count(0) == 1
    assert max(turns.values()) == 3
    # every rank of Df(2,4,2) shares its switch with one other: one of each pair is first
    assert sorted(turns.values()).count(3) == len(HOSTS) // 2


def test_a_result_lost_at_the_tail_of_its_burst_is_resent_before_the_timer() -> None:
    """The last chunk has no later one whose result could show its loss; every chunk of a
    1 KiB reduction goes out in one burst (NETCOLL_AGG_WINDOW 16), so the burst's other
    results do: the host resends once they trail clearly, not on the reduction's timer
    (transport/reduce_evidence.py). Before, the timer repaired it: with these timers a
    second or more later, and each rank in its turn after that."""
    last = CHUNKS - 1
    plan = {
        2: lose(wire.Op.RESULT, last, to_host(HOSTS[7])),
        3: lose(wire.Op.RESULT, last, to_host(HOSTS[40])),
        4: lose(wire.Op.RESULT, last, between_switches),
    }
    timer_resends = allreduces_under(plan, 5, "reduce_timer_resends")
    assert all(timer_resends[e] == 0 for e in (2, 3, 4)), timer_resends
    resends = allreduces_under(plan, 5, "reduce_retransmissions")
    # one host's RESULT: its own resend, answered by its switch
    assert resends[2] <= 1 and resends[3] <= 1, resends
    # a subtree's: its first member's, answered from above
    assert 1 <= resends[4] <= 2, resends
    assert resends[1] == resends[5] == 0, resends


def test_a_result_lost_below_the_root_is_asked_for_at_once_by_the_hosts_that_lack_it() -> None:
    """The root's next RESULT names the one before it: a host that lost that one asks its
    switch for it within a few milliseconds, where before it waited its turn (three or four
    turns for most ranks) as if every rank lacked the chunk. A REDUCE lost leaves every rank
    lacking a chunk no RESULT names: nobody asks that way, and the first member's resend
    repairs it as before."""
    middle = 3
    plan = {
        2: lose(wire.Op.RESULT, middle, to_host(HOSTS[7])),
        3: lose(wire.Op.RESULT, middle, between_switches),
        4: lose(wire.Op.REDUCE, middle, lambda link: link[0] < 0, src=HOSTS[5]),
    }
    asked = allreduces_under(plan, 5, "reduce_gap_resends")
    # one host's RESULT: that host asks for it; a subtree's: each of its hosts
    assert asked[2] == 1, asked
    assert 1 <= asked[3] <= 8, asked
    assert asked[1] == asked[4] == asked[5] == 0, asked
    # nobody waited for a turn to resend the lost RESULTs
    in_turn = allreduces_under(plan, 5, "reduce_overtaken_resends")
    assert in_turn[2] == in_turn[3] == 0, in_turn
