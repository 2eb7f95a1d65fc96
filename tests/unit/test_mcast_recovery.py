"""Loss recovery of the in-network broadcast at round-trip speed, one forced loss at a time.

Each test drops exactly one kind of frame on the in-process fabric (the switches are the
reference model) and checks that the broadcast completes well before the root's timeout
could have fired, and by the path meant for that loss: a receiver NACKs a gap or a stalled
tail to its co-root, the co-root repairs from its own copy (or, lacking it, asks the root
once for its whole group), and a member that lost everything is repaired by its co-root
unasked. The root's timeout is set to 4 s, so a recovery that waited for it fails the bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.comm import CommOptions
from host_agents.directory import Directory
from host_agents.engine import EngineConfig, EngineStats
from host_agents.plans import PlanBook
from host_agents.transport import aggregation, coroot_copies
from host_agents.transport.keys import McastKey
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 2)  # 5 groups, 10 routers, 20 hosts
MEMBERS = tuple(h.node_id for h in TOPO.hosts)
ROOT = MEMBERS[0]
SEGMENTS = 6
CONFIG = EngineConfig(
    segment_size=wire.MAX_PAYLOAD,
    rto_initial=4.0,  # the root's timeout: every test must finish long before it
    rto_min=4.0,
    nack_delay=0.002,
    tail_delay=0.01,
    coroot_probe_delay=0.03,
    peer_timeout=20.0,
)
# co-roots merge the ACKs here: their recovery paths are what these tests force
OPTIONS = CommOptions(
    progress_timeout=20.0, first_data_timeout=20.0, op_timeout=30.0, ack_merge="coroots"
)
BOUND = 2.0  # seconds: half the root's timeout

DropRule = Callable[[tuple[int, int], wire.Header], bool]


def plan_of(root: int = ROOT):  # type: ignore[no-untyped-def]
    directory = Directory.from_topology(TOPO)
    directory.comms[1] = MEMBERS
    return PlanBook(directory)(1, root, wire.Tree.INNET)


def remote_member() -> tuple[int, int]:
    """A receiver outside the root's group that is not its group's co-root, and that co-root."""
    plan = plan_of()
    for node in MEMBERS:
        target = plan.ack_target.get(node)
        if target not in (None, ROOT, node):
            assert target is not None
            return node, target
    raise AssertionError("no remote member")


def to_host(node: int) -> tuple[int, int]:
    host = TOPO.host_by_node(node)
    return (host.switch, host.port)


def first_copy(rule: DropRule) -> Callable[[tuple[int, int], bytes], bool]:
    """Drop the first frame matching ``rule`` on each link, once."""
    dropped: set[tuple[int, int]] = set()

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if link not in dropped and rule(link, hdr):
            dropped.add(link)
            return True
        return False

    return drop_if


def data_segment(seg: int | None = None) -> Callable[[wire.Header], bool]:
    def matches(hdr: wire.Header) -> bool:
        is_data = hdr.op == wire.Op.MCAST and not hdr.flags & wire.Flag.RETRANSMIT
        return is_data and (seg is None or hdr.seg_idx == seg)

    return matches


def broadcast(
    drop_if: Callable[[tuple[int, int], bytes], bool],
    *,
    data: bytes | None = None,
    config: EngineConfig = CONFIG,
    options: CommOptions = OPTIONS,
) -> tuple[float, Cluster]:
    """One in-network broadcast from ROOT (6 segments unless ``data`` is given) under
    ``drop_if``; (seconds, cluster)."""
    if data is None:
        data = random.Random(5).randbytes(SEGMENTS * wire.MAX_PAYLOAD - 7)
    result: dict[str, object] = {}

    async def body() -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            TOPO, MEMBERS, loop=loop, config=config, options=options, faults=Faults(drop_if=drop_if)
        )
        started = time.perf_counter()
        got = await asyncio.gather(
            *(
                c.bcast(data if c.rank == 0 else None, 0, size=len(data), algorithm="innet")
                for c in cluster.comms
            )
        )
        # with its ACKs: the root returned once its segments were out
        await asyncio.gather(*(c.settle() for c in cluster.comms))
        result["seconds"] = time.perf_counter() - started
        result["cluster"] = cluster
        assert all(g == data for g in got), "a rank got wrong data"

    asyncio.run(asyncio.wait_for(body(), 30))
    return result["seconds"], result["cluster"]  # type: ignore[return-value]


def root_stats(cluster: Cluster) -> dict[str, int]:
    return cluster.comms[0].engine.stats.as_dict()


@pytest.mark.parametrize("seg", [0, SEGMENTS // 2, SEGMENTS - 1], ids=["first", "middle", "last"])
def test_a_segment_lost_to_one_member_is_repaired_by_its_coroot(seg: int) -> None:
    member, coroot = remote_member()
    seconds, cluster = broadcast(
        first_copy(lambda link, hdr: link == to_host(member) and data_segment(seg)(hdr))
    )
    assert seconds < BOUND
    assert cluster.fabric.lost == 1
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert stats[coroot].coroot_repairs >= 1
    assert stats[member].nacks_sent >= 1, "the member asks: a gap, or a stalled tail"
    assert stats[ROOT].mcast_retransmissions == 0 and stats[ROOT].nacks_received == 0


def test_a_member_that_lost_every_segment_is_repaired_unasked() -> None:
    member, coroot = remote_member()
    seconds, cluster = broadcast(
        lambda link, frame: link == to_host(member) and data_segment()(wire.parse_frame(frame).hdr)
    )
    assert seconds < BOUND
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    # it saw nothing, so it could not ask: its co-root's probe sends the first segment, and
    # the member asks for the rest once (a probe of the whole message would send all of it
    # again to every merely slow member of a loaded host)
    assert stats[member].nacks_sent == 1
    assert stats[coroot].coroot_repairs >= SEGMENTS
    assert stats[ROOT].mcast_retransmissions == 0


def test_a_loss_above_a_group_brings_one_nack_to_the_root() -> None:
    """The middle segment is lost on every link into one remote group's co-root switch: its
    members and the co-root all miss it. Only the co-root asks the root, once; the root
    repairs the co-root by unicast and the co-root repairs its group."""
    _member, coroot = remote_member()
    group = TOPO.host_by_node(coroot).group
    group_hosts = {h.node_id for h in TOPO.hosts if h.group == group}
    group_links = {to_host(n) for n in group_hosts}
    seconds, cluster = broadcast(
        first_copy(lambda link, hdr: link in group_links and data_segment(SEGMENTS // 2)(hdr))
    )
    assert seconds < BOUND
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert stats[ROOT].nacks_received <= 2, "one NACK per co-root, not one per receiver"
    assert stats[ROOT].mcast_retransmissions == 0, "one group missing: unicast, not the tree"
    assert stats[coroot].coroot_repairs >= len(group_hosts) - 1


def test_members_that_asked_while_their_coroot_lacked_the_segment_are_not_made_to_ask_again() -> (
    None
):
    """One remote group loses the middle segment, and its co-root also the segments after it
    (so it notices only at its tail's silence, after its members asked). The co-root lacks
    what they ask for and asks the root; when the repair comes it repairs them at once (and
    relays it to those that have not asked yet), so each asks at most once. Before, they had
    to ask again (a NACK retry) for the co-root's copy."""
    _member, coroot = remote_member()
    plan = plan_of()
    members = [n for n, target in plan.ack_target.items() if target == coroot and n != coroot]
    assert members, "the co-root aggregates nobody"
    member_links = {to_host(n) for n in members}
    lost = SEGMENTS // 2
    dropped: set[tuple[int, int]] = set()

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if not data_segment()(hdr):
            return False
        if link == to_host(coroot):
            return hdr.seg_idx >= lost
        if link in member_links and hdr.seg_idx == lost and link not in dropped:
            dropped.add(link)
            return True
        return False

    seconds, cluster = broadcast(drop_if)
    assert seconds < BOUND
    assert dropped == member_links
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    asks = [stats[n].nacks_sent for n in members]
    assert max(asks) == 1, f"NACKs per member: {asks}"
    assert stats[coroot].coroot_repairs >= len(members)


def test_a_lost_repair_is_asked_for_again() -> None:
    member, coroot = remote_member()
    seg = 1

    def rule(link: tuple[int, int], hdr: wire.Header) -> bool:
        if link != to_host(member) or hdr.seg_idx != seg:
            return False
        return hdr.op == wire.Op.MCAST or bool(hdr.flags & wire.Flag.REPAIR)

    dropped = {"repairs": 0, "data": 0}

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if not rule(link, hdr):
            return False
        kind = "repairs" if hdr.flags & wire.Flag.REPAIR else "data"
        if dropped[kind] == 0:
            dropped[kind] += 1
            return True
        return False

    seconds, cluster = broadcast(drop_if)
    assert dropped == {"repairs": 1, "data": 1}
    assert seconds < BOUND
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert stats[member].nacks_sent >= 2
    assert stats[coroot].coroot_repairs >= 2


def broadcast_losing_a_final_ack() -> tuple[int, dict[int, EngineStats]]:
    """A broadcast in which a remote member's last ACK to its co-root is lost; it must end
    within BOUND. The co-root, and every node's stats."""
    member, coroot = remote_member()
    seconds, cluster = broadcast(
        first_copy(
            lambda link, hdr: link == (-1, member) and hdr.op == wire.Op.ACK and hdr.seq == SEGMENTS
        )
    )
    assert seconds < BOUND
    return coroot, {c.engine.node: c.engine.stats for c in cluster.comms}


def test_a_lost_final_ack_is_recovered_without_the_root() -> None:
    """A member's last ACK to its co-root is lost: the co-root sends it the tail again, the
    member answers as a complete receiver, and the root never times out."""
    coroot, stats = broadcast_losing_a_final_ack()
    assert stats[ROOT].mcast_retransmissions == 0
    assert stats[coroot].coroot_repairs >= 1


def test_a_member_whose_probe_was_lost_too_is_probed_again_without_the_root() -> None:
    """A member loses the broadcast, and then its co-root's probe too (a loaded switch drops
    both): the co-root probes again, and the root never times out. Probed once, the member
    waited for the root's timeout (every rank rooting 1 B on the dilated links)."""
    member, coroot = remote_member()
    probes = 0

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal probes
        hdr = wire.parse_frame(frame).hdr
        if link != to_host(member):
            return False
        if data_segment()(hdr):
            return True
        if hdr.flags & wire.Flag.REPAIR and hdr.src_node == coroot:
            probes += 1
            return probes == 1
        return False

    seconds, cluster = broadcast(drop_if)
    assert seconds < BOUND
    assert probes >= 2, "the co-root probed the silent member again"
    assert root_stats(cluster)["mcast_retransmissions"] == 0


def test_a_lost_final_ack_is_recovered_by_the_root_when_the_coroot_kept_no_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same loss at a co-root that gave its copy up (more multicasts in flight than it
    keeps): its probe asks the root to repair the member. Before, the probe sent nothing,
    the root's repairs to the co-root were passed on to nobody, and the root gave up at
    peer_timeout (every rank rooting a 16 KiB broadcast on Df(2,4,2), 72 copies per co-root
    against 64 kept, stalled the same way)."""
    monkeypatch.setattr(coroot_copies, "HELD_BYTES", 0)
    coroot, stats = broadcast_losing_a_final_ack()
    assert stats[coroot].coroot_repairs == 0 and stats[coroot].nacks_forwarded >= 1
    assert stats[ROOT].retransmissions >= 1, "the root repaired the member by unicast"


def test_a_coroot_keeps_copies_within_its_byte_budget_oldest_out_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(coroot_copies, "HELD_BYTES", 250)
    held = coroot_copies.HeldCopies()
    keys = [McastKey(ROOT, 1, epoch, wire.Tree.INNET) for epoch in range(1, 5)]
    for key in keys:
        held.add(key, bytes(100))
    assert [k in held for k in keys] == [False, False, True, True]
    held.pop(keys[2])
    held.add(keys[0], bytes(100))
    assert len(held) == 2 and keys[3] in held and keys[0] in held
    held.purge(1)
    assert len(held) == 0


def test_a_forged_repair_from_a_coroot_of_another_group_is_refused() -> None:
    """Only the co-root a member reports to may repair it: the new path opens no door."""
    member, coroot = remote_member()
    plan = plan_of()
    other = next(c for c in plan.aggregates if c not in (coroot, ROOT))
    from host_agents.entitlement import Entitlement, Refusal

    directory = Directory.from_topology(TOPO)
    directory.comms[1] = MEMBERS
    rules = Entitlement(member, directory, PlanBook(directory))
    repair = wire.Header(
        op=wire.Op.UNICAST,
        comm_id=1,
        epoch=1,
        tree=wire.Tree.INNET,
        flags=wire.Flag.REPAIR,
        src_node=other,
        dst_node=member,
        root_node=ROOT,
        seg_count=1,
        msg_len=10,
    )
    assert rules.multicast_data(repair) == Refusal.NOT_ROOT
    assert rules.multicast_data(dataclasses.replace(repair, src_node=coroot)) is None
    as_mcast = dataclasses.replace(repair, op=wire.Op.MCAST, src_node=coroot)
    assert rules.multicast_data(as_mcast) == Refusal.NOT_ROOT


def test_a_slow_host_learns_to_wait_longer_before_asking_for_a_tail() -> None:
    """Segments to one member arrive late (held back up to 60 ms, none lost): its NACKs are
    false alarms (the originals arrive after them), so its waits before a NACK grow instead
    of asking again and again: the tail's silence, or the gap's wait (held back in any
    order, the segments look like gaps as often as like a stalled tail)."""
    member, _coroot = remote_member()
    data = random.Random(6).randbytes(2 * wire.MAX_PAYLOAD)

    async def body() -> None:
        loop = asyncio.get_running_loop()
        faults = Faults(only_link=to_host(member), reorder=1.0, reorder_delay=0.06)
        cluster = Cluster(TOPO, MEMBERS, loop=loop, config=CONFIG, options=OPTIONS, faults=faults)
        slow = next(c for c in cluster.comms if c.engine.node == member)
        timing = slow.engine._mcast_rx.timing
        learn = timing._learn
        waits: list[float] = []  # each wait, as a multiple of where it starts

        def recording(kind: str, *, premature: bool) -> None:
            learn(kind, premature=premature)
            waits.append(timing.tail_quiet / CONFIG.tail_delay)
            waits.append(timing.gap_wait / CONFIG.nack_delay)

        timing._learn = recording  # type: ignore[method-assign]
        for _ in range(6):
            got = await asyncio.gather(
                *(
                    c.bcast(data if c.rank == 0 else None, 0, size=len(data), algorithm="innet")
                    for c in cluster.comms
                )
            )
            assert all(g == data for g in got)
        assert cluster.fabric.lost == 0
        assert slow.engine.stats.premature_nacks, "late segments must have looked like a tail"
        assert max(waits) >= 2

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_timeout_with_one_member_behind_repairs_it_alone() -> None:
    """A member of the root's own group loses every segment (it cannot NACK, and the root is
    its co-root): the root's timeout sends that member a copy, not the whole tree one."""
    plan = plan_of()
    member = next(n for n, target in plan.ack_target.items() if target == ROOT)
    config = dataclasses.replace(CONFIG, rto_initial=0.2, rto_min=0.2)
    data = random.Random(8).randbytes(3 * wire.MAX_PAYLOAD)

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        return link == to_host(member) and data_segment()(wire.parse_frame(frame).hdr)

    _seconds, cluster = broadcast(drop_if, data=data, config=config)
    stats = cluster.comms[0].engine.stats
    assert stats.mcast_retransmissions == 0, "one member behind: no copy down the tree"
    assert stats.retransmissions >= 3


def test_a_member_whose_acks_were_lost_is_asked_again_through_its_coroot() -> None:
    """Every ACK one remote member sends for the root's first window is lost. The member
    then has nothing new to acknowledge (the root waits for its co-root's merged ACK to
    open the window), so only the root's timeout can move things: it repairs the co-root,
    which had the segment already and passes it to the member, whose answer carries its
    real progress. Before the co-root passed such repairs on, the broadcast stalled."""
    member, coroot = remote_member()
    window = 4
    config = dataclasses.replace(CONFIG, mcast_window=window, rto_initial=0.2, rto_min=0.2)
    data = random.Random(9).randbytes(3 * window * wire.MAX_PAYLOAD)
    state = {"root_timed_out": False, "acks_lost": 0}

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if hdr.flags & wire.Flag.REPAIR and hdr.src_node == ROOT and hdr.dst_node == coroot:
            state["root_timed_out"] = True
        lose = link == (-1, member) and hdr.op == wire.Op.ACK and hdr.seq <= window
        if lose and not state["root_timed_out"]:
            state["acks_lost"] += 1
            return True
        return False

    options = dataclasses.replace(OPTIONS, progress_timeout=5.0)
    _seconds, cluster = broadcast(drop_if, data=data, config=config, options=options)
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert state["acks_lost"] >= 1 and state["root_timed_out"]
    assert stats[coroot].coroot_repairs >= 1, "the co-root passed the root's repair on"


def test_published_multicasts_bring_no_coroot_work() -> None:
    """Allgather's published blocks are repaired by their roots on request: co-roots keep
    no copies of them, merge no ACKs and pass no repairs on (a co-root that did sent members
    repairs without NO_ACK, and they acknowledged data nobody waited for)."""
    loss = Faults(loss=0.03, duplicate=0.02, reorder=0.02)

    async def body() -> None:
        loop = asyncio.get_running_loop()
        # the usual RTO: CONFIG's 4 s would make every receiver pause 4 s before asking
        config = dataclasses.replace(CONFIG, rto_initial=0.2, rto_min=0.05)
        cluster = Cluster(TOPO, MEMBERS, loop=loop, config=config, options=OPTIONS, faults=loss)
        for instance in range(3):
            blocks = [random.Random(instance * 100 + c.rank).randbytes(1500) for c in cluster.comms]
            got = await asyncio.gather(
                *(c.allgather(blocks[c.rank], algorithm="innet") for c in cluster.comms)
            )
            assert all(g == b"".join(blocks) for g in got)
        assert cluster.fabric.lost > 0
        stats = cluster.stats()
        assert stats["mcast_retransmissions"] > 0, "no block was repaired"
        assert stats["acks_sent"] == 0 and stats["coroot_repairs"] == 0
        for comm in cluster.comms:
            coroots = comm.engine._coroots
            assert not coroots._held and not coroots._aggregators

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_member_whose_acks_were_lost_gets_one_segment_not_the_whole_message() -> None:
    """A member that has everything but whose ACKs did not reach its co-root looks, to the
    co-root, like one that lost everything. The co-root's unasked repair is its first missing
    segment only: the member answers it with its progress. Sending the whole message again
    made every merely slow member of a loaded host receive it twice (every rank rooting a
    16 KiB broadcast at once: 46,000 duplicate segments for 2,600 sent, with no loss)."""
    member, coroot = remote_member()
    probed = False

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal probed
        hdr = wire.parse_frame(frame).hdr
        if link == to_host(member) and hdr.flags & wire.Flag.REPAIR:
            probed = True
        return link == (-1, member) and hdr.op == wire.Op.ACK and not probed

    seconds, cluster = broadcast(drop_if)
    assert seconds < BOUND
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert probed, "the co-root repaired the silent member unasked"
    assert stats[coroot].coroot_repairs == 1
    assert stats[member].duplicates >= 1 and stats[member].nacks_sent == 0


def coroots_of(cluster: Cluster, node: int):  # type: ignore[no-untyped-def]
    return next(c.engine for c in cluster.comms if c.engine.node == node)._coroots


def test_a_member_whose_acks_were_lost_tells_its_coroot_the_probe_was_needed() -> None:
    """The member answers the co-root's unasked repair with a D-SACK (it had the segment)
    saying it had it since before the probe's wait began: its ACKs were lost, the repair was
    what made it report, and the co-root does not learn to wait longer."""
    member, coroot = remote_member()
    probed = False
    dsacks: list[wire.Header] = []

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal probed
        hdr = wire.parse_frame(frame).hdr
        if link == to_host(member) and hdr.flags & wire.Flag.REPAIR:
            probed = True
        if link == (-1, member) and hdr.flags & wire.Flag.DUPLICATE:
            dsacks.append(hdr)
        return link == (-1, member) and hdr.op == wire.Op.ACK and not probed

    _, cluster = broadcast(drop_if)
    assert probed
    (dsack,) = dsacks
    assert dsack.op == wire.Op.ACK and dsack.dst_node == coroot
    assert dsack.msg_len >= CONFIG.coroot_probe_delay * 1e6  # held since before the wait
    assert all(coroots_of(cluster, n).patience == 1.0 for n in MEMBERS)


def test_a_member_that_got_the_segment_while_its_coroot_waited_makes_it_wait_longer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A D-SACK held for less than the co-root's wait: the member was slow, not silent, and
    the repair was not needed. On a loaded emulator members lag in bursts far past their
    usual measure: every rank rooting a 1 B broadcast sent 15,386 co-root repairs, nearly
    all duplicates, with no loss at all. The co-root doubles its waits, and halves them
    again after a half-life without such answers."""
    member, coroot = remote_member()
    learning = dataclasses.replace(CONFIG, dsack_learning=True)
    _, cluster = broadcast(lambda link, frame: False, config=learning)
    patient = coroots_of(cluster, coroot)
    # the clock stands still: patience decays with time, and a loaded machine may pause this
    # process between the lesson and the assertions for longer than 5% of a half-life
    now = patient.loop.time()
    monkeypatch.setattr(patient.loop, "time", lambda: now)
    # and the waits the broadcast measured are set aside: under load members lag and queues
    # form, which lengthens the probe delay this test compares with the configured one
    patient.member_lag = 0.0
    monkeypatch.setattr(aggregation, "queue_allowance", lambda endpoint, now: 0.0)
    key = McastKey(ROOT, 1, 1, wire.Tree.INNET)
    slow = key.feedback(
        wire.Op.ACK, member, coroot, seq=SEGMENTS, flags=wire.Flag.DUPLICATE, msg_len=1000
    )
    patient._learn_from_duplicate(key, slow)
    assert patient.patience == pytest.approx(2.0, rel=0.05)
    assert patient._probe_delay() == pytest.approx(2 * CONFIG.coroot_probe_delay, rel=0.05)
    patient._patience_at -= aggregation.PATIENCE_HALF_LIFE
    assert patient.patience == pytest.approx(1.0, rel=0.05)


def test_a_coroot_that_had_the_roots_repair_tells_the_root_its_timeout_was_spurious() -> None:
    """The co-root's reports to the root are lost until the root times out and repairs it:
    the co-root had the segment, says so (D-SACK), and the root takes the time since the
    segment was first sent as a round-trip sample, so its next timeout waits that long."""
    _, coroot = remote_member()
    repaired = False

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal repaired
        hdr = wire.parse_frame(frame).hdr
        if link == to_host(coroot) and hdr.flags & wire.Flag.REPAIR and hdr.src_node == ROOT:
            repaired = True
        leaving = link == (-1, coroot) and hdr.op == wire.Op.ACK and hdr.dst_node == ROOT
        return leaving and not repaired and not hdr.flags & wire.Flag.DUPLICATE

    fast = dataclasses.replace(CONFIG, rto_initial=0.05, rto_min=0.05, dsack_learning=True)
    _, cluster = broadcast(drop_if, config=fast)
    assert repaired
    root = cluster.comms[0].engine
    assert root.stats.spurious_retransmissions == 1
    ((_, rtt),) = [(k, v) for k, v in root._roots._rtt.items() if k[0] == 1]
    assert rtt.rto > 0.05


def test_a_member_that_asks_for_a_short_messages_tail_reports_its_progress_with_it() -> None:
    """The one ACK before completion: a member missing the last segment says how far it is
    in order along with its NACK, so its co-root knows what it lacks."""
    member, _ = remote_member()
    data = random.Random(8).randbytes(2 * wire.MAX_PAYLOAD - 3)
    last = first_copy(lambda link, hdr: link == to_host(member) and data_segment(1)(hdr))
    config = dataclasses.replace(CONFIG, tail_delay=0.005, coroot_probe_delay=1.0)
    seconds, cluster = broadcast(last, data=data, config=config)
    assert cluster.fabric.lost == 1, "the loss this test is about did not happen"
    assert seconds < BOUND
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert stats[member].nacks_sent == 1
    assert stats[member].acks_sent == 2, "progress with the NACK, then the final ACK"


def test_a_silent_member_of_a_short_message_is_probed_with_its_tail() -> None:
    """A member of a message that fits the root's window reports nothing before it completes,
    so when it lost only the last segment its co-root cannot know which one it lacks: the
    probe sends the last segment, which completes it before its own (here slow) tail NACK.
    A probe of the first segment was a duplicate, and the member waited for its NACK."""
    member, coroot = remote_member()
    data = random.Random(7).randbytes(2 * wire.MAX_PAYLOAD - 3)
    last = first_copy(lambda link, hdr: link == to_host(member) and data_segment(1)(hdr))
    config = dataclasses.replace(CONFIG, tail_delay=1.0)  # its own NACK comes late
    seconds, cluster = broadcast(last, data=data, config=config)
    assert cluster.fabric.lost == 1, "the loss this test is about did not happen"
    assert seconds < 0.5, "the member waited for its own tail NACK"
    stats = {c.engine.node: c.engine.stats for c in cluster.comms}
    assert stats[member].nacks_sent == 0
    assert stats[coroot].coroot_repairs == 1
    # and it sent one ACK, when complete: a message the root sends in one window needs no
    # progress report before (the delayed ACK of the first segment went too, before 6d90ba4)
    assert stats[member].acks_sent == 1


def test_a_member_its_coroot_repaired_does_not_lengthen_the_coroots_probe_delay() -> None:
    """Karn's rule for the co-root's measure of how members lag: a member that lost every
    segment completes only after the co-root's probe, a repair's time, not a lag. Counted
    (an eighth of each sample), every such loss lengthened the next probe delay, four times
    the measure: on BMv2 at 1% loss members lost alone waited over a second for their probe."""
    member, coroot = remote_member()
    probe_delay = 1.0
    config = dataclasses.replace(CONFIG, coroot_probe_delay=probe_delay)

    def lost_to_member(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        first = data_segment()(hdr) and not hdr.flags & wire.Flag.REPAIR
        return link == to_host(member) and first

    seconds, cluster = broadcast(lost_to_member, config=config)
    assert seconds >= probe_delay  # the member waited for its probe
    lag = coroots_of(cluster, coroot).member_lag
    assert lag < probe_delay / 16, f"member lag {lag:.3f} s after one repaired member"
