"""Repairs of a published multicast (allgather ``innet``), root and receiver, one engine each.

The root multicasts a repair once receivers on two routers of one group asked for the same
segment (the drop was on the group's global link, so more of them lack it) and unicasts it
otherwise; a receiver
times its wait for an answer from its first ask, so answers slower than its retry still
lengthen the wait (host_agents/transport/publish.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from controller import wire
from host_agents.directory import Directory, Place
from host_agents.engine import Engine, EngineConfig
from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Source
from host_agents.transport.publish import BACKOFF_PAUSES, MULTICAST_REPAIR_ASKERS
from tests.unit.test_transport import RecordingPort

pytestmark = pytest.mark.unit

ME, COMM, EPOCH = 1, 7, 3
# node -> router; routers 8-11 form group 2, 12-15 group 3: nodes 2 and 3 share router 9,
# node 4 is on router 10 in their group, node 6 on router 12 in another group
ROUTERS = {ME: 0, 2: 9, 3: 9, 4: 10, 5: 10, 6: 12}
SEGMENT = 100


def run(body: Callable[[Engine, RecordingPort], None]) -> None:
    async def main() -> None:
        port = RecordingPort()
        directory = Directory(
            macs={n: bytes([2, 0, 0, 0, 0, n]) for n in ROUTERS},
            places={n: Place(group=r // 4, switch=r, port=n) for n, r in ROUTERS.items()},
        )
        config = EngineConfig(segment_size=SEGMENT, repair_quiet_min=0.3)
        body(Engine(ME, port, directory, config), port)

    asyncio.run(main())


def repairs(port: RecordingPort) -> list[tuple[str, int]]:
    """Repairs sent since the last call: ("multicast", 0) or ("unicast", receiver)."""
    sent = [
        ("multicast", 0) if h.op == wire.Op.MCAST else ("unicast", h.dst_node)
        for h in port.sent
        if h.flags & wire.Flag.REPAIR
    ]
    port.sent.clear()
    return sent


def ask(engine: Engine, key: McastKey, receiver: int) -> None:
    engine._publisher.repair(key, receiver, [(0, 1)])


def published_block(engine: Engine, port: RecordingPort) -> McastKey:
    key = engine._publisher.publish(
        McastKey(ME, COMM, EPOCH, wire.Tree.INNET), Source(bytes(SEGMENT))
    )
    port.sent.clear()
    return key


def test_askers_on_one_router_get_unicasts_and_a_second_router_of_the_group_a_multicast() -> None:
    def body(engine: Engine, port: RecordingPort) -> None:
        key = published_block(engine, port)
        ask(engine, key, 2)
        ask(engine, key, 3)  # the same router: the drop was on its link, both asked
        assert repairs(port) == [("unicast", 2), ("unicast", 3)]
        ask(engine, key, 4)  # another router of the group lacks it: its global link dropped it
        assert repairs(port) == [("multicast", 0)]
        ask(engine, key, 5)  # on its way to 5 with the multicast
        assert repairs(port) == []

    run(body)


def test_a_receiver_asking_again_is_counted_once() -> None:
    def body(engine: Engine, port: RecordingPort) -> None:
        key = published_block(engine, port)
        published = engine._publisher._published[key]
        for _ in range(MULTICAST_REPAIR_ASKERS):
            ask(engine, key, 2)
            published.unicast_at.clear()  # its answer was overdue: resent, not multicast
        assert repairs(port) == [("unicast", 2)] * MULTICAST_REPAIR_ASKERS

    run(body)


def test_askers_in_two_groups_or_a_silence_apart_are_different_drops() -> None:
    """Host-link drops of one block on routers of two groups are common at 1% loss per link
    (71 host links carry it); a multicast to all 71 would repair two receivers."""

    def body(engine: Engine, port: RecordingPort) -> None:
        key = published_block(engine, port)
        ask(engine, key, 2)
        ask(engine, key, 6)  # another group
        assert repairs(port) == [("unicast", 2), ("unicast", 6)]
        engine._publisher._published[key].askers[0].since -= 1.0  # those asks were long ago
        ask(engine, key, 4)  # a new drop, on its own
        assert repairs(port) == [("unicast", 4)]

    run(body)


def test_an_answer_after_a_second_ask_is_timed_from_the_first() -> None:
    """Karn's rule sampled only answers to a first ask that came before the retry: answers
    slower than the retry were never measured and the retry stayed short (on BMv2 receivers
    asked again 1.8 times per frame lost). Timed from the first ask, a slow answer lengthens
    the wait."""

    def body(engine: Engine, port: RecordingPort) -> None:
        requests = engine._repairs
        msg = engine.mcast_incoming(2, COMM, EPOCH, wire.Tree.INNET, SEGMENT)
        requests.request_missing(msg, 2)
        msg.first_nack -= 0.25  # first asked 250 ms ago ...
        requests.request_missing(msg, 2)  # ... and again just now
        requests.repaired(msg, True)
        assert requests.retry_wait > requests.quiet, "the slow answer was not measured"
        assert requests.retry_wait <= BACKOFF_PAUSES * requests.quiet

    run(body)


def test_a_repair_this_receiver_did_not_ask_for_is_no_sample() -> None:
    def body(engine: Engine, port: RecordingPort) -> None:
        requests = engine._repairs
        msg = engine.mcast_incoming(2, COMM, EPOCH, wire.Tree.INNET, SEGMENT)
        requests.repaired(msg, True)  # a multicast repair other receivers asked for
        assert requests.retry_wait == requests.quiet

    run(body)
