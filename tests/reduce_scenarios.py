"""Single-switch reduction scenarios (REDUCE up the barrier tree, RESULT down it), run against
the reference model (unit tier) and BMv2 (data-plane tier) like tests/dataplane_scenarios.py,
whose switch layout they share: host ports 1-4 (nodes 1-4), parent switch on port 5, child
switch on port 6, management on port 7.

Expected results are computed here on Python integers and wrapped to int32 at the end, not
with the switch model's arithmetic, so a wrong wrap or sign in the model is caught too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller import wire
from controller.wire import AggOp, DropReason, MpKind, Op
from tests.dataplane_scenarios import (
    CHILD_NODE,
    CHILD_PORT,
    COMM,
    HOST_PORTS,
    MGMT_PORT,
    PARENT_NODE,
    PARENT_PORT,
    SWITCH_NODE,
    Checker,
    SwitchUnderTest,
    arrive,
    base_state,
    mp_frame,
    parsed,
    ports_of,
    write_barrier,
)

LANES = wire.AGG_LANES
WINDOW = wire.AGG_WINDOW
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
UNCONFIGURED_COMM = 200


def node_of(port: int) -> int:
    if port in HOST_PORTS:
        return port
    return CHILD_NODE if port == CHILD_PORT else PARENT_NODE


def agg_frame(
    port: int,
    values: Sequence[int],
    *,
    epoch: int = 1,
    chunk: int = 0,
    count: int | None = None,
    op: int = AggOp.SUM,
    kind: Op = Op.REDUCE,
    comm: int = COMM,
    payload: bytes | None = None,
    flags: int = 0,
    seq: int = 0,
) -> bytes:
    """A REDUCE (or RESULT) of ``chunk`` of instance ``epoch``; ``count`` chunks in the
    instance (default: more than ``chunk``, so it is not the last one)."""
    seg_count = (chunk + 2) % (1 << 32) if count is None else count
    hdr = wire.Header(
        op=kind,
        src_node=node_of(port),
        comm_id=comm,
        epoch=epoch,
        seg_idx=chunk,
        seg_count=seg_count,
        tree=op,
        flags=flags,
        seq=seq,
    )
    if payload is None:
        known = 1 <= op <= wire.AGG_OP_MAX
        payload = wire.pack_lanes(values, LANES, wire.agg_identity(AggOp(op)) if known else 0)
    mac = wire.mac_bytes(wire.host_mac(node_of(port)))
    return wire.build_frame(hdr, payload, src_mac=mac)


def send_agg(
    sut: SwitchUnderTest, port: int, values: Sequence[int], **fields: Any
) -> dict[int, list[bytes]]:
    return sut.send(port, agg_frame(port, values, **fields))


def reference(op: AggOp, vectors: Sequence[Sequence[int]]) -> list[int]:
    """Lane-wise op on unbounded integers, wrapped to int32 once at the end."""
    out = []
    for lane in zip(*vectors, strict=True):
        if op == AggOp.SUM:
            value = sum(lane)
        elif op == AggOp.MIN:
            value = min(lane)
        elif op == AggOp.MAX:
            value = max(lane)
        else:
            value = lane[0]
            for other in lane[1:]:
                if op == AggOp.AND:
                    value &= other
                elif op == AggOp.OR:
                    value |= other
                else:
                    value ^= other
        out.append((value + (1 << 31)) % (1 << 32) - (1 << 31))
    return out


def lanes_out(out: dict[int, list[bytes]], port: int, *, op: Op = Op.RESULT) -> list[int]:
    """The lanes of the one frame that left by ``port``, after checking what it is."""
    frames = parsed(out)[port]
    assert len(frames) == 1
    hdr = frames[0].hdr
    assert hdr.op == op and hdr.src_node == SWITCH_NODE and hdr.payload_crc == 0
    assert hdr.payload_len == 4 * LANES
    return wire.unpack_lanes(frames[0].payload)


EDGES = (INT32_MAX, INT32_MIN, -1, 0, 1, 0x55555555, -0x55555556)


def vectors(count: int, seed: int) -> list[list[int]]:
    """int32 vectors: lane 0 is INT32_MAX in every vector (a sum overflows), lane 1 INT32_MIN,
    the next lanes every pairing of the edge values, the rest pseudo-random of both signs."""
    state = seed
    out = []
    for n in range(count):
        row = [INT32_MAX, INT32_MIN]
        for lane in range(2, LANES):
            state = (state * 1103515245 + 12345) % (1 << 31)
            edge = lane - 2 < 2 * len(EDGES)
            row.append(
                EDGES[(lane + n * (lane // 7 + 1)) % len(EDGES)] if edge else state - (1 << 30)
            )
        out.append(row)
    return out


# -- scenarios -------------------------------------------------------------------------------


def scenario_reduce_every_op_on_a_root(sut: SwitchUnderTest) -> None:
    """Root switch, children hosts 1-3: each op's RESULT, exact, to exactly the children,
    only after the last contribution."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2, 3))
    check = Checker(sut)
    for op in AggOp:
        data = vectors(3, seed=int(op))
        check.mark()
        for port, values in zip((1, 2), data[:2], strict=True):
            assert ports_of(send_agg(sut, port, values, chunk=op, op=op)) == {}
        assert check.new_drops() == {DropReason.ABSORBED: 2}
        out = send_agg(sut, 3, data[2], chunk=op, op=op)
        assert ports_of(out) == {1: 1, 2: 1, 3: 1}, op.name
        expected = reference(op, data)
        for port in (1, 2, 3):
            assert lanes_out(out, port) == expected, op.name
            hdr = parsed(out)[port][0].hdr
            assert (hdr.epoch, hdr.seg_idx, hdr.tree, hdr.comm_id) == (1, op, op, COMM)
    # a short vector is padded with the op's identity by the host: the padding stays identity
    check.mark()
    send_agg(sut, 1, [5], chunk=9, op=AggOp.MIN)
    send_agg(sut, 2, [-7, 3], chunk=9, op=AggOp.MIN)
    out = send_agg(sut, 3, [], chunk=9, op=AggOp.MIN)
    assert lanes_out(out, 1) == [-7, 3] + [INT32_MAX] * (LANES - 2)


def scenario_reduce_duplicates_never_add_twice(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    check = Checker(sut)
    check.mark()
    a, b = [3] * LANES, [10] * LANES
    assert ports_of(send_agg(sut, 1, a)) == {}
    assert ports_of(send_agg(sut, 1, a)) == {}  # a retransmission: counted once
    assert ports_of(send_agg(sut, 1, [99] * LANES)) == {}  # even with other content
    assert check.new_drops() == {DropReason.ABSORBED: 1, DropReason.AGG_DUPLICATE: 2}
    out = send_agg(sut, 2, b)
    assert lanes_out(out, 1) == lanes_out(out, 2) == [13] * LANES
    # late or repeated contributions from either child: the result, to that child only
    for port in (1, 2, 1):
        late = send_agg(sut, port, [1000] * LANES)
        assert ports_of(late) == {port: 1}
        assert lanes_out(late, port) == [13] * LANES


def scenario_reduce_non_root_partial_up_and_result_down(sut: SwitchUnderTest) -> None:
    """Non-root switch: parent on port 5, children host 1 and the child switch."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=PARENT_PORT, children=(1, CHILD_PORT))
    assert ports_of(send_agg(sut, 1, [1] * LANES, op=AggOp.XOR)) == {}
    out = send_agg(sut, CHILD_PORT, [7] * LANES, op=AggOp.XOR)
    assert ports_of(out) == {PARENT_PORT: 1}
    assert lanes_out(out, PARENT_PORT, op=Op.REDUCE) == [6] * LANES
    # the partial may have been lost: a child's retransmission re-sends it, unchanged
    again = send_agg(sut, 1, [1] * LANES, op=AggOp.XOR)
    assert lanes_out(again, PARENT_PORT, op=Op.REDUCE) == [6] * LANES
    # RESULT only from the parent; from it, to exactly the children
    check = Checker(sut)
    check.mark()
    result = [42] * LANES
    for port in (CHILD_PORT, 1):
        assert ports_of(send_agg(sut, port, result, op=AggOp.XOR, kind=Op.RESULT)) == {}
    assert check.new_drops() == {DropReason.NOT_PARENT: 2}
    down = send_agg(sut, PARENT_PORT, result, op=AggOp.XOR, kind=Op.RESULT)
    assert ports_of(down) == {1: 1, CHILD_PORT: 1}
    assert lanes_out(down, 1) == lanes_out(down, CHILD_PORT) == result
    # now a late child retransmission is answered here, with the stored result
    late = send_agg(sut, CHILD_PORT, [7] * LANES, op=AggOp.XOR)
    assert ports_of(late) == {CHILD_PORT: 1} and lanes_out(late, CHILD_PORT) == result
    # a RESULT for an older chunk of the slot is stale
    check.mark()
    assert ports_of(send_agg(sut, PARENT_PORT, result, epoch=0, kind=Op.RESULT)) == {}
    assert check.new_drops() == {DropReason.AGG_STALE: 1}


def scenario_reduce_root_accepts_no_result(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2, CHILD_PORT))
    check = Checker(sut)
    check.mark()
    for port in (1, PARENT_PORT, CHILD_PORT):
        assert ports_of(send_agg(sut, port, [1] * LANES, kind=Op.RESULT)) == {}
    assert check.new_drops() == {DropReason.NOT_PARENT: 3}
    # nothing was stored: the chunk still needs all three children
    send_agg(sut, 1, [1] * LANES)
    send_agg(sut, 2, [2] * LANES)
    out = send_agg(sut, CHILD_PORT, [4] * LANES)
    assert ports_of(out) == {1: 1, 2: 1, CHILD_PORT: 1} and lanes_out(out, 1) == [7] * LANES


def scenario_reduce_slot_reuse_across_chunks_and_epochs(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    check = Checker(sut)

    def complete(epoch: int, chunk: int, x: int, y: int) -> None:
        send_agg(sut, 1, [x] * LANES, epoch=epoch, chunk=chunk)
        out = send_agg(sut, 2, [y] * LANES, epoch=epoch, chunk=chunk)
        assert lanes_out(out, 1) == [x + y] * LANES, (epoch, chunk)

    complete(1, 0, 1, 2)
    complete(1, WINDOW, 10, 20)  # same slot, next use: nothing left over from chunk 0
    check.mark()
    assert ports_of(send_agg(sut, 2, [5] * LANES, epoch=1, chunk=0)) == {}  # late duplicate
    assert check.new_drops() == {DropReason.AGG_STALE: 1}
    complete(2, 0, 100, 200)  # the next instance reuses the slot
    check.mark()
    assert ports_of(send_agg(sut, 1, [5] * LANES, epoch=1, chunk=WINDOW)) == {}
    assert check.new_drops() == {DropReason.AGG_STALE: 1}
    # the epoch wraps: 0 is after 0xFFFF
    complete(0xFFFF, 1, 3, 4)
    complete(0, 1, 30, 40)
    # a new configuration restarts a slot: a contribution counted under the old one is gone
    send_agg(sut, 1, [1000] * LANES, epoch=3, chunk=0)
    write_barrier(sut, COMM, 2, parent=0, children=(1, 2))
    check.mark()
    assert ports_of(send_agg(sut, 2, [7] * LANES, epoch=3, chunk=0)) == {}
    assert check.new_drops() == {DropReason.ABSORBED: 1}
    out = send_agg(sut, 1, [8] * LANES, epoch=3, chunk=0)
    assert lanes_out(out, 2) == [15] * LANES


def scenario_reduce_admission_and_ranges(sut: SwitchUnderTest) -> None:
    """Every index from the header is checked before a register is touched."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    check = Checker(sut)
    check.mark()
    bad = [
        (4, {}),  # not a child
        (1, {"comm": UNCONFIGURED_COMM}),
        (1, {"comm": 0xFFFF}),
        (1, {"chunk": 1 << 16}),
        (1, {"chunk": 0xFFFFFFFF}),
        (1, {"op": 0}),
        (1, {"op": wire.AGG_OP_MAX + 1}),
        (1, {"op": 0xFF}),
    ]
    for port, fields in bad:
        assert ports_of(send_agg(sut, port, [1] * LANES, **fields)) == {}, fields
    assert check.new_drops() == {
        DropReason.NOT_CHILD: 1,
        DropReason.BARRIER_UNCONFIGURED: 1,
        DropReason.COMM_RANGE: 1,
        DropReason.AGG_CHUNK_RANGE: 2,
        DropReason.AGG_BAD_OP: 3,
    }
    # a host claiming another host's node is caught before anything else
    check.mark()
    spoofed = agg_frame(1, [1] * LANES)
    assert ports_of(sut.send(2, spoofed)) == {}
    assert check.new_drops() == {DropReason.SRC_SPOOF: 1}
    assert sut.alive()
    # nothing above was counted: the chunk completes with exactly the two children
    send_agg(sut, 1, [1] * LANES)
    assert lanes_out(send_agg(sut, 2, [2] * LANES), 1) == [3] * LANES


def scenario_reduce_malformed_lane_counts(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    check = Checker(sut)
    check.mark()
    good = wire.pack_lanes([1] * LANES, LANES)
    payloads = [good[:-4], good + b"\x00" * 4, b"", good[:4]]
    for payload in payloads:
        assert ports_of(sut.send(1, agg_frame(1, [], payload=payload))) == {}
    # payload_len right, but the frame ends inside the lanes
    truncated = agg_frame(1, [1] * LANES)[:-8]
    assert ports_of(sut.send(1, truncated)) == {}
    assert check.new_drops() == {DropReason.MALFORMED: len(payloads) + 1}
    send_agg(sut, 1, [1] * LANES)
    assert lanes_out(send_agg(sut, 2, [2] * LANES), 2) == [3] * LANES


def released_epoch(sut: SwitchUnderTest) -> int:
    reply = parsed(sut.send(MGMT_PORT, mp_frame(MpKind.READ_BARRIER, COMM, 0)))[MGMT_PORT][0]
    assert reply.mp is not None
    return reply.mp.epoch


def scenario_reduce_last_chunk_releases_its_epoch(sut: SwitchUnderTest) -> None:
    """Instances are barrier epochs: sending the last chunk's RESULT down moves the barrier
    slot's released epoch on (if newer), so later barriers stay inside their window."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2), epoch=0)
    for chunk in (0, 1):
        send_agg(sut, 1, [1] * LANES, chunk=chunk, count=2)
        assert released_epoch(sut) == 0, "released moved before the last chunk completed"
        send_agg(sut, 2, [1] * LANES, chunk=chunk, count=2)
    assert released_epoch(sut) == 1
    # the barrier after it: epoch 5 = released + window is counted, not out of window
    check = Checker(sut)
    check.mark()
    assert ports_of(arrive(sut, 1, 5)) == {}
    assert check.new_drops() == {DropReason.ABSORBED: 1}
    # an older instance completing late does not move released back
    send_agg(sut, 1, [1] * LANES, epoch=0, chunk=2, count=3)
    send_agg(sut, 2, [1] * LANES, epoch=0, chunk=2, count=3)
    assert released_epoch(sut) == 1
    # below the root: the RESULT of the last chunk from the parent, and only that one
    write_barrier(sut, COMM, 2, parent=PARENT_PORT, children=(1, 2), epoch=10)
    send_agg(sut, PARENT_PORT, [3] * LANES, epoch=11, chunk=0, count=2, kind=Op.RESULT)
    assert released_epoch(sut) == 10
    down = send_agg(sut, PARENT_PORT, [3] * LANES, epoch=11, chunk=1, count=2, kind=Op.RESULT)
    assert ports_of(down) == {1: 1, 2: 1} and released_epoch(sut) == 11
    # a REDUCE completing the last chunk here goes up: the parent's RESULT will release it
    send_agg(sut, 1, [1] * LANES, epoch=12, chunk=0, count=1)
    assert ports_of(send_agg(sut, 2, [1] * LANES, epoch=12, chunk=0, count=1)) == {PARENT_PORT: 1}
    assert released_epoch(sut) == 11


def scenario_reduce_far_ahead_epoch_is_out_of_window(sut: SwitchUnderTest) -> None:
    """Issue 32, Medium 7: a member's REDUCE far ahead of the released epoch is dropped before
    it takes a slot (it used to start the slot FRESH, and every honest, older contribution was
    then dropped as stale); the honest instance completes."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    check = Checker(sut)
    check.mark()
    for far in (1000, 0x7FFF, 6):  # released is 0; the window is 4 epochs
        assert ports_of(send_agg(sut, 1, [666] * LANES, epoch=far)) == {}
    assert check.new_drops() == {DropReason.OUT_OF_WINDOW: 3}
    assert ports_of(send_agg(sut, 1, [1] * LANES, epoch=1)) == {}
    out = send_agg(sut, 2, [2] * LANES, epoch=1)
    assert lanes_out(out, 1) == lanes_out(out, 2) == [3] * LANES


def scenario_reduce_resend_asks_the_missing_children(sut: SwitchUnderTest) -> None:
    """A resent REDUCE (RETRANSMIT) whose child is recorded while others are missing goes
    down, still a REDUCE, to exactly the missing children; a plain duplicate asks nothing."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=PARENT_PORT, children=(1, 2, CHILD_PORT))
    check = Checker(sut)
    assert ports_of(send_agg(sut, 1, [1] * LANES)) == {}
    check.mark()
    assert ports_of(send_agg(sut, 1, [1] * LANES)) == {}  # a duplicate from the link
    assert check.new_drops() == {DropReason.AGG_DUPLICATE: 1}
    asked = send_agg(sut, 1, [1] * LANES, flags=wire.Flag.RETRANSMIT)
    assert ports_of(asked) == {2: 1, CHILD_PORT: 1}
    for port in (2, CHILD_PORT):
        hdr = parsed(asked)[port][0].hdr
        assert (hdr.op, hdr.src_node, hdr.seg_idx) == (Op.REDUCE, SWITCH_NODE, 0)
    # the ask changed nothing: the chunk completes with the two others, counted once each
    assert ports_of(send_agg(sut, CHILD_PORT, [4] * LANES)) == {}
    asked = send_agg(sut, 1, [1] * LANES, flags=wire.Flag.RETRANSMIT)
    assert ports_of(asked) == {2: 1}
    up = send_agg(sut, 2, [2] * LANES)
    assert lanes_out(up, PARENT_PORT, op=Op.REDUCE) == [7] * LANES


def scenario_reduce_switch_asked_by_its_parent(sut: SwitchUnderTest) -> None:
    """A REDUCE from the parent port asks for this subtree's part: an incomplete slot passes
    the ask to its missing children, a complete one sends its aggregate up again, one that
    holds the result drops it; an ask records and adds nothing."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=PARENT_PORT, children=(1, 2, CHILD_PORT))
    check = Checker(sut)
    assert ports_of(send_agg(sut, PARENT_PORT, [100] * LANES)) == {1: 1, 2: 1, CHILD_PORT: 1}
    send_agg(sut, 1, [1] * LANES)
    asked = send_agg(sut, PARENT_PORT, [100] * LANES)
    assert ports_of(asked) == {2: 1, CHILD_PORT: 1}
    assert parsed(asked)[2][0].hdr.op == Op.REDUCE
    send_agg(sut, 2, [2] * LANES)
    up = send_agg(sut, CHILD_PORT, [4] * LANES)
    assert lanes_out(up, PARENT_PORT, op=Op.REDUCE) == [7] * LANES
    again = send_agg(sut, PARENT_PORT, [100] * LANES)  # the partial was lost on its way up
    assert ports_of(again) == {PARENT_PORT: 1}
    assert lanes_out(again, PARENT_PORT, op=Op.REDUCE) == [7] * LANES
    down = send_agg(sut, PARENT_PORT, [9] * LANES, kind=Op.RESULT)
    assert ports_of(down) == {1: 1, 2: 1, CHILD_PORT: 1}
    check.mark()
    assert ports_of(send_agg(sut, PARENT_PORT, [100] * LANES)) == {}
    assert check.new_drops() == {DropReason.AGG_DUPLICATE: 1}
    # an ask for the slot's next chunk takes nothing from the one it holds: a late REDUCE of
    # that one is still answered, and the next chunk adds up from its own contributions only
    nxt = {"chunk": WINDOW}
    assert ports_of(send_agg(sut, PARENT_PORT, [100] * LANES, **nxt)) == {
        1: 1, 2: 1, CHILD_PORT: 1}  # fmt: skip
    late = send_agg(sut, 2, [2] * LANES)
    assert ports_of(late) == {2: 1} and lanes_out(late, 2) == [9] * LANES
    for port, value in ((1, 10), (2, 20)):
        assert ports_of(send_agg(sut, port, [value] * LANES, **nxt)) == {}
    up = send_agg(sut, CHILD_PORT, [40] * LANES, **nxt)
    assert lanes_out(up, PARENT_PORT, op=Op.REDUCE) == [70] * LANES
    # at the root the parent port is no port of the tree: a REDUCE from it is no ask
    write_barrier(sut, COMM, 2, parent=0, children=(1, 2))
    check.mark()
    assert ports_of(send_agg(sut, PARENT_PORT, [1] * LANES, epoch=2)) == {}
    assert check.new_drops() == {DropReason.NOT_CHILD: 1}


def scenario_reduce_root_names_the_chunk_it_completed_before(sut: SwitchUnderTest) -> None:
    """The root's RESULT names in seq the chunk the root completed before it, as its tag
    (epoch ++ chunk; 0 for the first after configuration), whatever seq the contributions
    carried: in completion order, across instances, per communicator. An answer from a slot
    names nothing (0); below the root a RESULT passes down with the name it came with."""
    other = COMM + 1
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    write_barrier(sut, other, 1, parent=0, children=(1, 2))

    def tag(epoch: int, chunk: int) -> int:
        return epoch << 16 | chunk

    def complete(comm: int, chunk: int, epoch: int = 1) -> int:
        send_agg(sut, 1, [1] * LANES, chunk=chunk, comm=comm, epoch=epoch, seq=999)
        out = send_agg(sut, 2, [2] * LANES, chunk=chunk, comm=comm, epoch=epoch, seq=0xFFFFFFFF)
        named = {parsed(out)[port][0].hdr.seq for port in (1, 2)}
        assert len(named) == 1, named  # the same to every child
        return named.pop()

    assert complete(COMM, 2) == 0
    assert complete(COMM, 0) == tag(1, 2)  # completion order, not chunk order
    assert complete(COMM, 1) == tag(1, 0)
    assert complete(other, 5) == 0  # another communicator's own
    assert complete(COMM, 3, epoch=2) == tag(1, 1)  # across instances
    assert complete(other, 6) == tag(1, 5)
    late = send_agg(sut, 1, [1] * LANES, chunk=1, seq=77)
    assert ports_of(late) == {1: 1} and parsed(late)[1][0].hdr.seq == 0
    # below the root: the name comes from the parent, answers name nothing
    write_barrier(sut, COMM, 2, parent=PARENT_PORT, children=(1, 2))
    send_agg(sut, 1, [1] * LANES, epoch=3)
    up = send_agg(sut, 2, [2] * LANES, epoch=3)
    assert ports_of(up) == {PARENT_PORT: 1}
    down = send_agg(sut, PARENT_PORT, [3] * LANES, epoch=3, kind=Op.RESULT, seq=tag(2, 9))
    assert {parsed(down)[port][0].hdr.seq for port in (1, 2)} == {tag(2, 9)}
    again = send_agg(sut, 2, [2] * LANES, epoch=3, seq=5)
    assert ports_of(again) == {2: 1} and parsed(again)[2][0].hdr.seq == 0


REDUCE_SCENARIOS = [
    scenario_reduce_root_names_the_chunk_it_completed_before,
    scenario_reduce_resend_asks_the_missing_children,
    scenario_reduce_switch_asked_by_its_parent,
    scenario_reduce_every_op_on_a_root,
    scenario_reduce_duplicates_never_add_twice,
    scenario_reduce_non_root_partial_up_and_result_down,
    scenario_reduce_root_accepts_no_result,
    scenario_reduce_slot_reuse_across_chunks_and_epochs,
    scenario_reduce_admission_and_ranges,
    scenario_reduce_malformed_lane_counts,
    scenario_reduce_last_chunk_releases_its_epoch,
    scenario_reduce_far_ahead_epoch_is_out_of_window,
]
