"""The management node's mini packets, through a fabric of reference-model switches: slots
written across the dragonfly, only differences sent, losses retransmitted, stale writes
refused, and the result used by real broadcasts and barriers."""

from __future__ import annotations

import asyncio

import pytest

from controller import wire
from controller.desired_state import Communicator, Membership, desired_state
from controller.drivers.minipackets import MiniPacketDriver, MiniPacketError
from controller.switch_state import SwitchState, TreeSlot
from controller.topology_build import dragonfly
from controller.wire import MpKind
from host_agents.comm import Comm, CommOptions
from host_agents.directory import Directory
from host_agents.engine import Engine, EngineConfig
from host_agents.plans import PlanBook
from tests.fabric import Fabric, Faults

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 2, 2)
MEMBERS = tuple(h.node_id for h in TOPO.hosts[:12])


def unwritten(states: dict[int, SwitchState]) -> dict[int, SwitchState]:
    """The same tables, but the registers left for mini packets to fill."""
    out = {}
    for s, state in states.items():
        copy = SwitchState(
            s,
            state.node_id,
            state.ports,
            state.routes,
            state.trees,
            state.groups,
            state.replication,
        )
        out[s] = copy
    return out


def run(coro_factory, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        await asyncio.wait_for(coro_factory(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


def test_slots_written_by_mini_packets_carry_collectives() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        states = desired_state(TOPO, [Communicator(1, MEMBERS, membership=Membership.MINI_PACKETS)])
        fabric = Fabric(TOPO, unwritten(states), loop=loop, faults=Faults(loss=0.05), seed=3)
        driver = MiniPacketDriver(fabric.mgmt_port(), loop=loop, timeout=0.02)
        written = sum(await asyncio.gather(*(driver.push(st) for st in states.values())))
        assert written == sum(len(st.tree_slots) + len(st.barrier_slots) for st in states.values())
        assert driver.stats.retransmitted > 0, "5% loss and nothing was retransmitted?"
        # pushing again sends nothing: the driver knows what each switch holds
        sent = driver.stats.sent
        assert sum(await asyncio.gather(*(driver.push(st) for st in states.values()))) == 0
        assert driver.stats.sent == sent
        # the registers are what the controller wanted
        for s, state in states.items():
            model = fabric.models[s]
            for slot, content in state.tree_slots.items():
                assert (model.tree_parent[slot], model.tree_children[slot]) == (
                    content.parent_port,
                    content.children,
                )
        # and real collectives run on them
        comms = []
        for node in MEMBERS:
            directory = Directory.from_topology(TOPO)
            engine = Engine(
                node,
                fabric.port(node),
                directory,
                EngineConfig(rto_initial=0.02),
                loop=loop,
                plan=PlanBook(directory),
            )
            comms.append(
                Comm(engine, 1, MEMBERS, innet=True, options=CommOptions(progress_timeout=5))
            )
        data = b"written by mini packets" * 50
        results = await asyncio.gather(
            *(
                c.bcast(data if c.rank == 4 else None, 4, size=len(data), algorithm="innet")
                for c in comms
            )
        )
        assert all(r == data for r in results)
        await asyncio.gather(*(c.barrier(algorithm="innet") for c in comms))

    run(body)


def test_forget_rewrites_reads_back_and_stale_is_refused() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        states = desired_state(TOPO, [Communicator(2, MEMBERS)])
        fabric = Fabric(TOPO, unwritten(states), loop=loop)
        driver = MiniPacketDriver(fabric.mgmt_port(), loop=loop, timeout=0.05)
        switch = next(s for s, st in states.items() if st.barrier_slots)
        node = states[switch].node_id
        await driver.push(states[switch])
        read = await driver.read_barrier(node, 2)
        slot = states[switch].barrier_slots[2]
        assert (read.parent_port, read.children, read.generation) == (
            slot.parent_port,
            slot.child_mask,
            1,
        )
        driver.forget(node)  # as after a restart: everything again, newer generation
        assert await driver.push(states[switch]) == len(states[switch].barrier_slots)
        assert (await driver.read_barrier(node, 2)).generation == 2
        # a write with an old generation is refused, and the slot keeps its content
        stale = wire.MiniPacket(
            kind=MpKind.WRITE_TREE, slot=7, generation=5, parent_port=1, children=1
        )
        assert (await driver.request(node, stale)).status == wire.MpStatus.OK
        older = wire.MiniPacket(
            kind=MpKind.WRITE_TREE, slot=7, generation=4, parent_port=2, children=2
        )
        assert (await driver.request(node, older)).status == wire.MpStatus.STALE
        assert (await driver.read_tree(node, 7)).children == 1
        with pytest.raises(MiniPacketError, match="BAD_SLOT"):
            driver._count(
                await driver.request(
                    node, wire.MiniPacket(kind=MpKind.WRITE_TREE, slot=60000, generation=1)
                ),
                node,
            )
        with pytest.raises(MiniPacketError, match="did not answer"):
            await driver.request(0x7000, wire.MiniPacket(kind=MpKind.READ_TREE, slot=1), retries=2)

    run(body)


def test_write_tree_through_the_driver_api() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        states = desired_state(TOPO)
        fabric = Fabric(TOPO, states, loop=loop)
        driver = MiniPacketDriver(fabric.mgmt_port(), loop=loop, timeout=0.05)
        node = wire.switch_node_id(3)
        assert (
            await driver.write_tree(node, 9, TreeSlot(parent_port=2, children=0b101))
            == wire.MpStatus.OK
        )
        reply = await driver.read_tree(node, 9)
        assert (reply.parent_port, reply.children) == (2, 0b101)

    run(body)
