"""A collective's bounded wait (EngineContext.wait): a timer beside the awaited future.

It must behave as the ``wait_for(shield(...))`` loop it replaced: the result or the engine's
error comes through, a caller that gives up leaves the awaited work running, and a wait with
no progress fails within its bound with a message that names what it waited for.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.topology_build import dragonfly
from host_agents.comm import CollectiveError, CommOptions
from host_agents.engine_context import EngineContext
from host_agents.transport.config import EngineError
from tests.fabric import Cluster

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 2, 1)
QUICK = CommOptions(
    progress_timeout=0.3, first_data_timeout=0.2, op_timeout=1.0, check_interval=0.05
)


def context(loop: asyncio.AbstractEventLoop, options: CommOptions = QUICK) -> EngineContext:
    hosts = tuple(h.node_id for h in TOPO.hosts)[:2]
    comm = Cluster(TOPO, hosts, loop=loop, options=options).comms[0]
    return EngineContext(comm, 1, "test(wait)")


def run(body):  # type: ignore[no-untyped-def]
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), 10)

    asyncio.run(main())


def test_the_result_and_the_engines_error_come_through() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        ctx = context(loop)
        done: asyncio.Future[int] = loop.create_future()
        loop.call_later(0.01, done.set_result, 7)
        assert await ctx.wait(done, "a number") == 7

        async def failing() -> None:
            raise EngineError("peer 9 gone")

        with pytest.raises(CollectiveError, match="a send: peer 9 gone"):
            await ctx.wait(failing(), "a send")

    run(body)


def test_a_caller_that_gives_up_leaves_the_awaited_future_running() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        ctx = context(loop)
        shared: asyncio.Future[None] = loop.create_future()
        waiter = loop.create_task(ctx.wait(shared, "a message"))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not shared.done(), "the awaited future must not be cancelled with its waiter"
        shared.set_result(None)  # and it completes later for whoever else awaits it

    run(body)


def test_a_wait_without_progress_fails_within_its_bound_naming_what_it_waited_for() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        ctx = context(loop)
        never: asyncio.Future[None] = loop.create_future()
        started = loop.time()
        with pytest.raises(CollectiveError, match="waiting for rank 1: nothing arrived"):
            await ctx.wait(never, "waiting for rank 1", progress=lambda: 0)
        assert 0.2 <= loop.time() - started < 0.5
        assert never.cancelled(), "a receive that stalled is abandoned"

        arrived = [0]

        def trickle() -> None:
            arrived[0] += 1

        for at in (0.05, 0.1):
            loop.call_later(at, trickle)
        stalled: asyncio.Future[None] = loop.create_future()
        with pytest.raises(CollectiveError, match=r"stalled, no new segment .* after 2 arrived"):
            await ctx.wait(stalled, "receiving", progress=lambda: arrived[0])

        # without a progress measure only op_timeout bounds it
        slow: asyncio.Future[None] = loop.create_future()
        with pytest.raises(CollectiveError, match="gave up after 1 s"):
            await ctx.wait(slow, "a multicast")
        assert not slow.cancelled()

    run(body)
