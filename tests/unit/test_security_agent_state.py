"""Members exhausting or misleading a host agent's own state (issue 32: Medium 6, Medium 8 and
the Low items on drop-reason keys and timeouts)."""

from __future__ import annotations

import pytest

from host_agents.transport.config import EngineStats
from host_agents.transport.drops import DropLog

pytestmark = [pytest.mark.unit, pytest.mark.security]


def test_drop_reasons_make_a_bounded_number_of_counter_keys() -> None:
    """Before: the size-mismatch reason carried both sizes in its key, so one member sending
    messages of many sizes made thousands of counter keys."""
    stats = EngineStats()
    drop = DropLog(1, stats)
    for size in range(5000):
        drop(f"message size not the expected one: {size} bytes, not 10", None)
        drop(f"message of {size} bytes where 10 are expected", None)  # the old text
        drop(f"unheard-of reason {size}", None)
    assert len(stats.dropped) <= 64 + 1, f"{len(stats.dropped)} keys"
    assert stats.dropped["message size not the expected one"] == 5000
    assert sum(stats.dropped.values()) == 15000  # every drop is still counted


def test_a_roots_timeout_names_the_receivers_behind_a_silent_coroot() -> None:
    """Before: the root's timeout named the co-root only, not the receiver that held it."""
    import asyncio
    import random

    from controller import wire
    from controller.topology_build import dragonfly
    from controller.wire import Op
    from host_agents.comm import CommOptions
    from host_agents.directory import Directory
    from host_agents.engine import EngineConfig
    from host_agents.plans import PlanBook
    from tests.fabric import Cluster, Faults

    topo = dragonfly(2, 2, 1)
    hosts = tuple(h.node_id for h in topo.hosts)
    directory = Directory.from_topology(topo)
    directory.comms[1] = hosts
    plan = PlanBook(directory)(1, hosts[0], wire.Tree.INNET)
    coroot, group = next((c, g) for c, g in plan.aggregates.items() if c != hosts[0])
    blocked = next(m for m in group if m != coroot)
    place = topo.host_by_node(blocked)

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        return link == (place.switch, place.port) and wire.parse_frame(
            frame, check_crc=False
        ).hdr.op in (Op.MCAST, Op.UNICAST)

    config = EngineConfig(rto_initial=0.05, rto_min=0.02, peer_timeout=0.6)
    options = CommOptions(progress_timeout=30, first_data_timeout=30, op_timeout=30)

    async def main() -> str:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            topo, hosts, loop=loop, config=config, options=options, faults=Faults(drop_if=drop_if)
        )
        data = random.Random(1).randbytes(3000)
        root = cluster.comms[0]
        multicasts = root.engine._roots  # the root's own multicasts, to see how one ends
        started = []
        send = multicasts.send

        def recording_send(*args, **kwargs):  # type: ignore[no-untyped-def]
            started.append(send(*args, **kwargs))
            return started[-1]

        multicasts.send = recording_send  # type: ignore[method-assign]
        tasks = [
            asyncio.ensure_future(c.bcast(None, 0, size=len(data), algorithm="innet"))
            for c in cluster.comms[1:]
            if c.engine.node != blocked
        ]
        try:
            await asyncio.wait_for(root.bcast(data, 0, size=len(data), algorithm="innet"), 20)
            await asyncio.wait_for(started[0].done, 20)  # the root returned once it had sent
        except Exception as exc:  # the root's failure, as its user sees it
            return str(exc)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return "no error"

    text = asyncio.run(main())
    assert f"node {coroot}" in text or str(coroot) in text, text
    assert "behind it: nodes" in text and str(blocked) in text.split("behind it: nodes")[1], text


def _early_frames(victim_comm, count: int, claimed: int, first_tag: int):  # type: ignore[no-untyped-def]
    from controller import wire
    from controller.wire import Op

    for tag in range(count):
        yield wire.Header(
            op=Op.UNICAST,
            comm_id=victim_comm.comm_id,
            epoch=2,
            tag=first_tag + tag,
            dst_node=victim_comm.engine.node,
            seg_count=-(-claimed // wire.MAX_PAYLOAD),
            msg_len=claimed,
            payload_len=min(claimed, wire.MAX_PAYLOAD),
        )


def test_early_data_is_charged_for_every_byte_it_holds() -> None:
    """Before: the received-segment map of an early message was allocated from the claimed
    length and not charged: 40 frames of 1,460 B pinned 29 MB (506x the charge)."""
    import asyncio
    import gc
    import tracemalloc

    from controller import wire
    from tests.unit.test_security_agents import Attacker, cluster_of, run

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop)
        victim = cluster.comms[2]
        attacker = Attacker(cluster, cluster.comms[1].engine.node, loop)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for hdr in _early_frames(victim, 40, 1 << 30, 5000):
                attacker.send(hdr, b"Z" * wire.MAX_PAYLOAD)
            await asyncio.sleep(0.05)
            held_memory = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        charged = victim.engine.early_bytes_held
        assert held_memory > 1 << 20, "the frames did not arrive"
        assert held_memory <= 1.1 * charged + (256 << 10), (
            f"early data holds {held_memory} bytes, charged {charged}"
        )

    run(body)


def test_complete_early_messages_expire() -> None:
    """Before: a complete early message nobody asked for stayed, and its charge, for good."""
    import asyncio
    import dataclasses

    from tests.fabric import Cluster
    from tests.unit.test_security_agents import CONFIG, MEMBERS, OPTIONS, TOPO, Attacker, run

    config = dataclasses.replace(CONFIG, early_complete_timeout=0.2)  # type: ignore[call-arg]

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(TOPO, MEMBERS, loop=loop, config=config, options=OPTIONS)
        victim = cluster.comms[2]
        attacker = Attacker(cluster, cluster.comms[1].engine.node, loop)
        for hdr in _early_frames(victim, 3, 100, 7000):  # one segment each: complete at once
            attacker.send(hdr, b"Z" * 100)
        await asyncio.sleep(0.05)
        assert victim.engine.early_bytes_held > 0
        await asyncio.sleep(0.6)
        assert victim.engine.early_bytes_held == 0
        assert victim.engine.stats.dropped["early message expired"] == 3

    run(body)


def test_a_coroot_cannot_substitute_the_roots_data_at_its_members() -> None:
    """Before: a co-root's repairs were taken as the first copy of segments a member lost, so
    the member returned bytes the root never sent, with no error."""
    import asyncio
    import random

    from controller import wire
    from controller.topology_build import dragonfly
    from controller.wire import Flag, Op
    from host_agents.comm import CommOptions
    from host_agents.directory import Directory
    from host_agents.engine import EngineConfig
    from host_agents.plans import PlanBook
    from tests.fabric import Cluster, Faults

    topo = dragonfly(2, 2, 1)
    hosts = tuple(h.node_id for h in topo.hosts)
    directory = Directory.from_topology(topo)
    directory.comms[1] = hosts
    plan = PlanBook(directory)(1, hosts[0], wire.Tree.INNET)
    coroot, group = next((c, g) for c, g in plan.aggregates.items() if c != hosts[0])
    victim = next(m for m in group if m != coroot)
    place = topo.host_by_node(victim)
    lost = 1  # the root's copy of this segment never reaches the victim

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame, check_crc=False).hdr
        return (
            link == (place.switch, place.port)
            and hdr.src_node == hosts[0]
            and hdr.op in (Op.MCAST, Op.UNICAST)
            and hdr.seg_idx == lost
        )

    config = EngineConfig(rto_initial=0.5, rto_min=0.2, nack_delay=0.002, peer_timeout=10)
    options = CommOptions(progress_timeout=5, first_data_timeout=10, op_timeout=10)

    async def main() -> object:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            topo, hosts, loop=loop, config=config, options=options, faults=Faults(drop_if=drop_if)
        )
        hostile = next(c for c in cluster.comms if c.engine.node == coroot).engine
        mac = hostile.directory.mac(victim)

        def substitute(frame: bytes) -> None:
            hdr = wire.parse_frame(frame, check_crc=False).hdr
            if hdr.op == Op.MCAST and hdr.seg_idx == lost:
                forged = hdr.with_(
                    op=Op.UNICAST, flags=Flag.REPAIR, src_node=coroot, dst_node=victim, seq=0
                )
                payload = b"\xee" * hdr.payload_len
                hostile.port.send(wire.build_frame(forged, payload, dst_mac=mac))

        hostile.port.on_frame = substitute  # type: ignore[attr-defined]
        data = random.Random(8).randbytes(4 * wire.MAX_PAYLOAD)
        receiver = next(c for c in cluster.comms if c.engine.node == victim)
        root = cluster.comms[0]
        sending = asyncio.ensure_future(root.bcast(data, 0, size=len(data), algorithm="innet"))
        try:
            got = await asyncio.wait_for(
                receiver.bcast(None, 0, size=len(data), algorithm="innet"), 15
            )
            return bytes(got) == data or "substituted"
        except Exception as exc:
            return exc
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)

    outcome = asyncio.run(main())
    assert outcome is True or isinstance(outcome, Exception), (
        "the member returned bytes the root never sent, with no error"
    )
    if isinstance(outcome, Exception):
        assert "digest" in str(outcome), outcome
