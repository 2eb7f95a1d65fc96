"""A reduction across two reference-model switches, with the frames between them carried (or
lost) by the test: the retransmission story of docs/protocol.md holds across switches.

    host 1 --1-+            +-2-- host 3
               leaf --5--1- root
    host 2 --2-+

The leaf's parent is the root (leaf port 5 to root port 1); the root's children are the leaf
and host 3. Hosts resend their REDUCE until they hold the RESULT, as agents do.
"""

from __future__ import annotations

import pytest

from controller import wire
from controller.switch_model import SwitchModel
from controller.switch_state import (
    BarrierSlot,
    PortRole,
    Replication,
    ReplicationMode,
    SwitchState,
    ports_bitmap,
)
from controller.wire import AggOp, DropReason, Op

pytestmark = pytest.mark.unit

COMM = 7
LANES = wire.AGG_LANES
LEAF_UP, ROOT_DOWN = 5, 1
GROUP = 1


def switch(index: int, hosts: dict[int, int], switch_ports: tuple[int, ...]) -> SwitchModel:
    state = SwitchState(switch=index, node_id=wire.switch_node_id(index))
    for port, node in hosts.items():
        state.ports[port] = (PortRole.HOST, node)
    for port in switch_ports:
        state.ports[port] = (PortRole.SWITCH, 0)
    state.replication = Replication(ReplicationMode.ALL_PORTS, GROUP)
    state.groups[GROUP] = tuple(sorted(state.ports))
    return SwitchModel(state)


@pytest.fixture
def tree() -> tuple[SwitchModel, SwitchModel]:
    leaf = switch(0, {1: 1, 2: 2}, (LEAF_UP,))
    root = switch(1, {2: 3}, (ROOT_DOWN,))
    leaf.write_barrier_slot(COMM, BarrierSlot(LEAF_UP, ports_bitmap((1, 2))), 1)
    root.write_barrier_slot(COMM, BarrierSlot(0, ports_bitmap((ROOT_DOWN, 2))), 1)
    return leaf, root


def contribution(node: int, values: list[int], chunk: int = 0) -> bytes:
    hdr = wire.Header(op=Op.REDUCE, comm_id=COMM, epoch=1, seg_idx=chunk, tree=AggOp.SUM)
    payload = wire.pack_lanes(values, LANES)
    return wire.build_frame(hdr.with_(src_node=node), payload)


def results(outputs: list[tuple[int, bytes]], port: int) -> list[list[int]]:
    frames = [wire.parse_frame(data) for out_port, data in outputs if out_port == port]
    assert all(f.hdr.op == Op.RESULT for f in frames)
    return [wire.unpack_lanes(f.payload) for f in frames]


def up(outputs: list[tuple[int, bytes]]) -> list[bytes]:
    return [data for port, data in outputs if port == LEAF_UP]


def test_a_lost_partial_is_recovered_by_a_host_retransmission(
    tree: tuple[SwitchModel, SwitchModel],
) -> None:
    leaf, root = tree
    assert leaf.process(contribution(1, [1] * LANES), 1).outputs == []
    lost = up(leaf.process(contribution(2, [2] * LANES), 2).outputs)
    assert len(lost) == 1  # the partial leaves the leaf ... and is lost on the link
    assert root.process(contribution(3, [4] * LANES), 2).ingress_reason == DropReason.ABSORBED
    # host 1 has no result yet: it resends; the complete leaf re-sends the partial
    resent = up(leaf.process(contribution(1, [1] * LANES), 1).outputs)
    assert resent == lost
    down = root.process(resent[0], ROOT_DOWN).outputs
    assert results(down, 2) == [[7] * LANES]  # host 3
    to_leaf = [data for port, data in down if port == ROOT_DOWN]
    out = leaf.process(to_leaf[0], LEAF_UP).outputs
    assert results(out, 1) == results(out, 2) == [[7] * LANES]


def test_a_lost_result_is_answered_by_the_nearest_switch_that_has_it(
    tree: tuple[SwitchModel, SwitchModel],
) -> None:
    leaf, root = tree
    leaf.process(contribution(1, [10] * LANES), 1)
    partial = up(leaf.process(contribution(2, [20] * LANES), 2).outputs)
    root.process(contribution(3, [-5] * LANES), 2)
    down = root.process(partial[0], ROOT_DOWN).outputs
    to_leaf = [data for port, data in down if port == ROOT_DOWN]
    leaf.process(to_leaf[0], LEAF_UP)  # RESULT reached hosts 1 and 2 ... host 2's copy is lost
    # host 2 resends: the leaf answers it alone, from its stored result, nothing goes up
    answer = leaf.process(contribution(2, [20] * LANES), 2).outputs
    assert [port for port, _ in answer] == [2] and results(answer, 2) == [[25] * LANES]
    # host 3's copy was lost too: the root answers host 3 alone
    answer = root.process(contribution(3, [-5] * LANES), 2).outputs
    assert [port for port, _ in answer] == [2] and results(answer, 2) == [[25] * LANES]
    assert root.counters.drops[DropReason.AGG_DUPLICATE] == 0
