"""The agents' raw-socket port on a real veth pair: every frame arrives, in order."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import wire
from host_agents.port import RawSocketPort
from mininet_topos.network import netns
from mininet_topos.tooling.registry import RunRegistry

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace"),
]


@contextlib.contextmanager
def veth_pair(tmp_path: Path) -> Iterator[tuple[RawSocketPort, RawSocketPort]]:
    """Two raw-socket ports on the ends of a veth pair in a fresh network namespace."""
    name = f"nc-port-{uuid.uuid4().hex[:6]}"
    registry = RunRegistry(name.removeprefix("nc-"), tmp_path)
    netns.create(name, registry)
    try:
        netns.add_veth(name, "pa", "pb")
        a = netns.call_in(name, lambda: RawSocketPort("pa"))
        b = netns.call_in(name, lambda: RawSocketPort("pb"))
        yield a, b
        a.close()
        b.close()
    finally:
        netns.delete(name)
        registry.close()


def test_ten_thousand_frames_cross_a_veth_pair_in_order(tmp_path: Path) -> None:
    with veth_pair(tmp_path) as (a, b):
        count = 10_000

        async def exchange() -> list[int]:
            loop = asyncio.get_running_loop()
            got: list[int] = []
            done = loop.create_future()

            def on_frame(frame: bytes) -> None:
                got.append(wire.parse_frame(frame).hdr.seq)
                if len(got) == count and not done.done():
                    done.set_result(None)

            a.start(loop, lambda _f: None)
            b.start(loop, on_frame)
            for seq in range(count):
                a.send(wire.build_frame(wire.Header(op=wire.Op.UNICAST, seq=seq), b"x" * 1000))
                if seq % 500 == 499:
                    await asyncio.sleep(0)  # let the receiver drain, as agents do between sends
            with contextlib.suppress(TimeoutError):  # the assertion below says what is missing
                await asyncio.wait_for(done, 20)
            return got

        got = asyncio.run(exchange())
        assert got == list(range(10_000))
        assert a.backlog == 0 and a.send_errors == 0


def test_frames_the_kernel_drops_before_the_agent_reads_them_are_counted(tmp_path: Path) -> None:
    """An agent that does not read for a while (starved of CPU) loses what overflows its
    receive buffer without seeing it: the port reports how many, once each."""
    with veth_pair(tmp_path) as (a, b):  # b is never started: nobody reads

        async def flood() -> None:
            a.start(asyncio.get_running_loop(), lambda _f: None)
            for seq in range(20_000):  # about 30 MB, several times the 8 MiB buffer
                a.send(wire.build_frame(wire.Header(op=wire.Op.UNICAST, seq=seq), b"x" * 1400))
                if seq % 500 == 499:
                    await asyncio.sleep(0)

        asyncio.run(flood())
        dropped = b.receive_drops()
        assert 0 < dropped < 20_000
        assert b.receive_drops() == dropped, (
            "the kernel's counter resets on reading: no double count"
        )
    assert b.receive_drops() == dropped, "closed, it keeps the count"
