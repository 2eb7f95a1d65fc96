"""Who asks for a published multicast's repair, and when; and NACKs a root cannot answer.

Receivers that lost the same frame ask in slots one repair round trip apart (the first member
of each dragonfly group, then the first on each other router, then the rest), so that a drop
high in the tree brings a few NACKs and one multicast repair, not one NACK per receiver. A
root counts the NACKs it cannot answer, apart from hostile ones (host_agents/transport/publish.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.comm import Comm, CommOptions
from host_agents.directory import Directory, Place
from host_agents.engine import Engine, EngineConfig
from host_agents.transport.feedback import pack_ranges
from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Source
from host_agents.transport.publish import WITHDRAWN_REMEMBERED, ask_slot
from tests import allgather_timing
from tests.fabric import Cluster, Faults
from tests.unit.test_transport import RecordingPort

pytestmark = pytest.mark.unit


def test_the_first_member_of_a_group_asks_first_then_one_per_router_then_the_rest() -> None:
    # group 0: routers 0 and 1; group 1: routers 2 and 3 (nodes 10-17, two per router)
    places = {
        n: Place(group=(n - 10) // 4, switch=(n - 10) // 2, port=n % 2) for n in range(10, 18)
    }
    members = tuple(range(10, 18))
    slots = {n: ask_slot(n, members, places) for n in members}
    assert slots == {10: 0, 11: 2, 12: 1, 13: 2, 14: 0, 15: 2, 16: 1, 17: 2}
    # only members count: without 10 and 12, 11 leads group 0 and 13 its router
    assert ask_slot(11, (11, 13), places) == 0
    assert ask_slot(13, (11, 13), places) == 1
    # no placement known (a bare test port): nobody waits
    assert ask_slot(99, members, places) == 0


TOPO: Topology = dragonfly(2, 2, 2)  # 5 groups of 2 routers, 20 hosts
MEMBERS = tuple(h.node_id for h in TOPO.hosts)
OWNER = 3  # the rank whose block is lost on its own link: every other rank lacks it


def test_a_block_lost_on_its_roots_link_is_asked_for_by_a_few_not_by_every_receiver() -> None:
    """Without slots all 19 receivers asked at the end of one silence; with them, the first
    members of the groups ask, the root multicasts the repair, and the rest hear it first."""
    owner_node = MEMBERS[OWNER]
    lost: list[int] = []

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        first = (
            link == (-1, owner_node)  # the fabric's name for a host's uplink
            and hdr.op == wire.Op.MCAST
            and hdr.root_node == owner_node
            and not hdr.flags & wire.Flag.REPAIR
        )
        if first:
            lost.append(1)
        return first

    async def main() -> None:
        cluster = Cluster(
            TOPO,
            MEMBERS,
            loop=asyncio.get_running_loop(),
            config=EngineConfig(segment_size=wire.MAX_PAYLOAD, repair_quiet_min=0.3),
            options=CommOptions(progress_timeout=20.0, first_data_timeout=20.0, op_timeout=30.0),
            faults=Faults(drop_if=drop_if),
        )
        loop = asyncio.get_running_loop()
        await allgather_timing.timed_allgather(cluster.comms, 0, loop.time(), 1000, "innet")
        assert lost == [1], "the owner's block was not lost on its link"
        root_stats = cluster.comms[OWNER].engine.stats
        assert root_stats.published_multicast_repairs >= 1
        # 5 groups: at most one first member each, and a slot-1 asker or two that asked
        # before the multicast came back; all 19 before
        assert root_stats.nacks_received <= 8, root_stats.nacks_received

    asyncio.run(asyncio.wait_for(main(), 60))


ME, COMM, EPOCH = 1, 7, 3
MEMBER, STRANGER = 2, 9


def with_root(body: Callable[[Engine], None]) -> None:
    async def main() -> None:
        nodes = (ME, MEMBER, STRANGER)
        directory = Directory(
            macs={n: bytes([2, 0, 0, 0, 0, n]) for n in nodes},
            places={n: Place(group=0, switch=0, port=n) for n in nodes},
        )
        engine = Engine(ME, RecordingPort(), directory, EngineConfig(segment_size=100))
        engine.register_comm(COMM, (ME, MEMBER))
        body(engine)

    asyncio.run(main())


def nack(engine: Engine, src: int, epoch: int) -> None:
    key = McastKey(ME, COMM, epoch, wire.Tree.INNET)
    hdr = key.feedback(wire.Op.NACK, src, ME)
    engine._on_frame(wire.build_frame(hdr, pack_ranges([(0, 1)])))


def test_nacks_the_root_cannot_answer_are_counted_by_why_and_a_strangers_dropped() -> None:
    def body(engine: Engine) -> None:
        stats = engine.stats
        key = engine._publisher.publish(
            McastKey(ME, COMM, EPOCH, wire.Tree.INNET), Source(bytes(100))
        )
        nack(engine, MEMBER, EPOCH + 1)  # an operation ahead: not published yet
        assert (stats.nacks_unheld, stats.published_nacks_withdrawn) == (1, 0)
        engine._publisher.withdraw(key, confirmed=True)
        nack(engine, MEMBER, EPOCH)  # after the barrier said everyone had it
        assert (stats.nacks_unheld, stats.published_nacks_withdrawn) == (1, 1)
        # withdrawn without the barrier's word (an error, a barrier timeout): others may
        # still lack it, so a NACK for it is no sign of a bug
        other = engine._publisher.publish(
            McastKey(ME, COMM, EPOCH + 2, wire.Tree.INNET), Source(bytes(100))
        )
        engine._publisher.withdraw(other)
        nack(engine, MEMBER, EPOCH + 2)
        assert (stats.nacks_unheld, stats.published_nacks_withdrawn) == (2, 1)
        # a non-member's NACKs change nothing but the drop counter
        before = sum(stats.dropped.values())
        nack(engine, STRANGER, EPOCH)
        nack(engine, STRANGER, EPOCH + 1)
        assert (stats.nacks_unheld, stats.published_nacks_withdrawn) == (2, 1)
        assert sum(stats.dropped.values()) == before + 2

    with_root(body)


def test_a_root_remembers_only_its_newest_withdrawals() -> None:
    """The oldest confirmed withdrawal is forgotten once WITHDRAWN_REMEMBERED newer ones are
    kept: a late NACK for it counts as unheld, one for the newest as withdrawn."""

    def body(engine: Engine) -> None:
        stats = engine.stats
        for epoch in range(EPOCH, EPOCH + WITHDRAWN_REMEMBERED + 1):
            key = engine._publisher.publish(
                McastKey(ME, COMM, epoch, wire.Tree.INNET), Source(bytes(100))
            )
            engine._publisher.withdraw(key, confirmed=True)
        nack(engine, MEMBER, EPOCH)
        assert (stats.nacks_unheld, stats.published_nacks_withdrawn) == (1, 0)
        nack(engine, MEMBER, EPOCH + 1)
        nack(engine, MEMBER, EPOCH + WITHDRAWN_REMEMBERED)
        assert (stats.nacks_unheld, stats.published_nacks_withdrawn) == (1, 2)

    with_root(body)


def test_a_group_that_starts_late_gets_one_probe_per_silence_not_an_ask_per_root() -> None:
    """The last group's ranks enter the allgather 1.5 s after the others: the others' silences
    end with none of its blocks here. They ask one of its roots per silence (a probe), not
    each of them, until any of its blocks arrives."""
    late = [r for r, node in enumerate(MEMBERS) if TOPO.host_by_node(node).group == 4]
    assert len(late) == 4

    async def main() -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            TOPO,
            MEMBERS,
            loop=loop,
            config=EngineConfig(segment_size=wire.MAX_PAYLOAD, repair_quiet_min=0.3),
            options=CommOptions(progress_timeout=20.0, first_data_timeout=20.0, op_timeout=30.0),
        )
        data = allgather_timing.blocks(0, 1000, len(MEMBERS))

        async def rank(comm: Comm) -> None:
            if comm.rank in late:
                await asyncio.sleep(1.5)
            assert bytes(await comm.allgather(data[comm.rank], algorithm="innet")) == b"".join(data)

        await asyncio.gather(*(rank(c) for c in cluster.comms))
        unheld = cluster.stats()["nacks_unheld"]
        # 16 waiting ranks, three silences each before the late group publishes: one probe
        # per silence made 48 NACKs the late roots could not answer; an ask per root, 128 to
        # 192 (as the silences fall)
        assert 0 < unheld <= 96, unheld

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_partly_repaired_root_leaves_no_due_ask_behind_to_spin_the_wait() -> None:
    """A root asked once sends part of what was missing: the next silence asks for the rest.
    Its due time, left in the pacer, made timeout() 0 until that silence: the allgather's
    wait loop spun (never busy-poll: CPU is the emulator's limit)."""

    def body(engine: Engine) -> None:
        msg = engine.mcast_incoming(MEMBER, COMM, EPOCH, wire.Tree.INNET, 300)  # 3 segments
        pacer = engine.repair_pacer(1, (ME, MEMBER))
        pending = {1: msg}
        start = engine.loop.time()
        silence = start + 10.0
        pacer.tick(pending, lambda rank: MEMBER, silence)
        assert engine.stats.nacks_sent == 1
        hdr = wire.Header(
            op=wire.Op.MCAST,
            comm_id=COMM,
            epoch=EPOCH,
            tree=wire.Tree.INNET,
            flags=wire.Flag.NO_ACK | wire.Flag.REPAIR,
            src_node=MEMBER,
            root_node=MEMBER,
            seg_idx=0,
            seg_count=3,
            msg_len=300,
        )
        engine._on_frame(wire.build_frame(hdr, bytes(100)))
        assert msg.n_received == 1
        # its answer is due (one pause), the next silence (two pauses) is not
        later = silence + 1.5 * pacer.quiet / 2
        pacer.tick(pending, lambda rank: MEMBER, later)
        assert engine.stats.nacks_sent == 1  # progressing: not asked again before the silence
        assert pacer.timeout(later) > 0.1 * pacer.quiet

    with_root(body)


def test_on_shaped_links_real_repairs_shrink_the_pause_to_the_blocks_own_frames() -> None:
    """At 10 Mb/s the data timers stretch by a 9014-byte frame's 7.2 ms; a 1 KiB block's frame
    takes 0.9 ms. The pause before asking starts stretched (a network that loses nothing
    asks no earlier than before) and repairs that bring what was missing shrink it down to
    the unshaped floor, not the stretched one: held at 2.2 s, every allgather of 1 KiB blocks
    that lost a frame took 8.9 s at 1% loss on Df(2,4,2), against 1.2 s without loss."""
    from mininet_topos.links.shaping import LinkModel
    from mininet_topos.links.timing import control_time_scale, frame_scaling, time_scale
    from mininet_topos.network.interfaces import timers_for

    links = LinkModel(rate=10)
    timers = timers_for(time_scale(links, 9000), control_time_scale(links))[0]
    cfg = EngineConfig(segment_size=wire.max_payload(9000), **timers, **frame_scaling(links, 9000))
    unshaped = EngineConfig()

    async def main() -> None:
        directory = Directory(
            macs={n: bytes([2, 0, 0, 0, 0, n]) for n in (ME, MEMBER)},
            places={n: Place(group=0, switch=0, port=n) for n in (ME, MEMBER)},
        )
        engine = Engine(ME, RecordingPort(), directory, cfg)
        engine.register_comm(COMM, (ME, MEMBER))
        requests = engine._repairs
        stretched = max(cfg.rto_initial, cfg.repair_quiet_min)
        assert requests.quiet == pytest.approx(stretched)
        small = engine.mcast_incoming(MEMBER, COMM, EPOCH, wire.Tree.INNET, 1024)
        for _ in range(20):
            requests.repaired(small, True)
        assert requests.quiet == pytest.approx(unshaped.repair_quiet_min)
        full = engine.mcast_incoming(MEMBER, COMM, EPOCH + 1, wire.Tree.INNET, 65536)
        requests.quiet = stretched
        for _ in range(20):
            requests.repaired(full, True)
        assert requests.quiet == pytest.approx(cfg.repair_quiet_min)  # full frames: stretched

    asyncio.run(main())
