"""Single-switch scenarios of switch-merged ACKs (p4src/common/ackmerge.p4), run against the
reference model (unit tier) and BMv2 (data-plane tier) like tests/dataplane_scenarios.py, whose
switch layout and trees (``with_trees``) they share: for (COMM, root 1) this is the root's
switch (merged ACKs go out of host port 1), for (COMM, REMOTE_ROOT) an inner switch (merged
ACKs go up PARENT_PORT); the children are hosts 2, 3 and the child switch in both.
"""

from __future__ import annotations

from controller import wire
from controller.wire import DropReason, Flag, Op
from tests.dataplane_scenarios import (
    CHILD_NODE,
    CHILD_PORT,
    COMM,
    HOST_PORTS,
    OTHER_COMM,
    PARENT_NODE,
    PARENT_PORT,
    REMOTE_ROOT,
    SWITCH_NODE,
    Checker,
    SwitchUnderTest,
    base_state,
    parsed,
    ports_of,
    with_trees,
)

SEG_COUNT = 40  # checkpoints of 16: 1 (cum 16), 2 (cum 32), 3 (cum 40, the final one)


def node_of(port: int) -> int:
    if port in HOST_PORTS:
        return port
    return CHILD_NODE if port == CHILD_PORT else PARENT_NODE


def ack_frame(
    port: int,
    checkpoint: int,
    *,
    root: int = 1,
    comm: int = COMM,
    epoch: int = 1,
    seq: int | None = None,
    seg_count: int = SEG_COUNT,
    src: int | None = None,
    flags: int = Flag.MERGE,
) -> bytes:
    """A receiver's (or child switch's) checkpoint ACK as host_agents/transport/merged_acks.py
    sends it."""
    hdr = wire.Header(
        op=Op.ACK,
        src_node=node_of(port) if src is None else src,
        dst_node=root,
        root_node=root,
        comm_id=comm,
        epoch=epoch,
        seq=min(16 * checkpoint, seg_count) if seq is None else seq,
        seg_idx=checkpoint,
        seg_count=seg_count,
        flags=flags,
    )
    return wire.build_frame(hdr, b"\0" * 8, src_mac=wire.mac_bytes(wire.host_mac(node_of(port))))


def send_ack(sut: SwitchUnderTest, port: int, checkpoint: int, **fields: int) -> dict[int, int]:
    return ports_of(sut.send(port, ack_frame(port, checkpoint, **fields)))


def scenario_ack_merge_one_ack_after_every_child(sut: SwitchUnderTest) -> None:
    """At the root's switch: nothing until hosts 2, 3 and the child switch all have the
    checkpoint, then ONE ACK to the root host, named by the switch. At the complete cell the
    leader child's (host 2, the lowest child port) repeats go up again, so a lost merged ACK is
    recovered by the receivers' repeats; the other children's repeats stay here."""
    sut.configure(with_trees(base_state(sut)))
    check = Checker(sut)
    check.mark()
    assert send_ack(sut, 2, 1) == {}
    assert send_ack(sut, 3, 1) == {}
    assert send_ack(sut, 2, 1) == {}  # a duplicate before completion counts once
    assert check.new_drops()[DropReason.ABSORBED] == 3
    out = sut.send(CHILD_PORT, ack_frame(CHILD_PORT, 1))
    assert ports_of(out) == {1: 1}
    up = parsed(out)[1][0].hdr
    assert up.op == Op.ACK and up.flags & Flag.MERGE and up.src_node == SWITCH_NODE
    assert (up.seq, up.seg_idx, up.seg_count, up.root_node, up.epoch) == (16, 1, SEG_COUNT, 1, 1)
    check.mark()
    assert send_ack(sut, 3, 1) == {} and send_ack(sut, CHILD_PORT, 1) == {}
    assert check.new_drops()[DropReason.ABSORBED] == 2
    assert send_ack(sut, 2, 1) == {1: 1}
    assert send_ack(sut, 2, 1) == {1: 1}


def scenario_ack_merge_inner_switch_reordering(sut: SwitchUnderTest) -> None:
    """An inner switch sends up PARENT_PORT. Checkpoints complete in any order and each on its
    own; epochs and checkpoints sharing a cell never mix."""
    sut.configure(with_trees(base_state(sut)))
    remote = {"root": REMOTE_ROOT}
    for port in (2, 3):
        assert send_ack(sut, port, 3, **remote) == {}  # the final checkpoint first
    assert send_ack(sut, 2, 1, **remote) == {}
    # another epoch and checkpoint 1 + 8 (same cell as 1): each replaces the cell, never adds
    assert send_ack(sut, 3, 1, epoch=2, **remote) == {}
    assert send_ack(sut, 3, 9, seq=16 * 9, seg_count=16 * 9, **remote) == {}
    assert send_ack(sut, CHILD_PORT, 1, **remote) == {}  # cell 1 holds only what came since
    out = sut.send(CHILD_PORT, ack_frame(CHILD_PORT, 3, **remote))
    assert ports_of(out) == {PARENT_PORT: 1}
    up = parsed(out)[PARENT_PORT][0].hdr
    assert (up.seq, up.seg_idx, up.src_node) == (SEG_COUNT, 3, SWITCH_NODE)
    # checkpoint 1 restarts from its children and completes on its own
    assert send_ack(sut, 2, 1, **remote) == {}
    assert send_ack(sut, 3, 1, **remote) == {PARENT_PORT: 1}


def scenario_ack_merge_admission_and_ranges(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    check = Checker(sut)
    check.mark()
    rejected = [
        (4, ack_frame(4, 1)),  # host 4 is no child of the tree
        (PARENT_PORT, ack_frame(PARENT_PORT, 1)),  # nor is the parent
        (1, ack_frame(1, 1)),  # nor the root host itself
        (2, ack_frame(2, 1, root=3)),  # no ACK-merge entry for (COMM, 3)
        (2, ack_frame(2, 1, comm=0xFFFF, root=0xFFFF)),
        (1, ack_frame(1, 1, comm=OTHER_COMM, root=4)),  # an entry naming a slot beyond the cells
        (2, ack_frame(2, 0)),  # checkpoint 0
        (2, ack_frame(2, 1 << 16)),  # checkpoint beyond 16 bits
        (2, ack_frame(2, 1, seq=SEG_COUNT + 1)),  # cum beyond seg_count
        (2, ack_frame(2, 1, seq=0)),
        (2, ack_frame(2, 1, src=3)),  # host 2 speaking for host 3
    ]
    for port, data in rejected:
        assert ports_of(sut.send(port, data)) == {}
    drops = check.new_drops()
    assert drops[DropReason.ACK_NOT_CHILD] == 3
    assert drops[DropReason.ACK_UNCONFIGURED] == 3
    assert drops[DropReason.ACK_RANGE] == 4
    assert drops[DropReason.SRC_SPOOF] == 1
    assert sut.alive()
    # none of them counted: the checkpoint still needs all three children
    assert send_ack(sut, 2, 1) == {} and send_ack(sut, 3, 1) == {}
    assert send_ack(sut, CHILD_PORT, 1) == {1: 1}
    # an ACK without the flag is plain unicast, routed by its destination
    assert send_ack(sut, 2, 1, flags=Flag.NONE) == {1: 1}


def scenario_ack_merge_after_restart(sut: SwitchUnderTest) -> None:
    """A restarted switch has zeroed cells: the children's repeats rebuild the checkpoint."""
    state = with_trees(base_state(sut))
    sut.configure(state)
    assert send_ack(sut, 2, 3) == {} and send_ack(sut, 3, 3) == {}
    sut.configure(state)  # restart: tables pushed again, registers empty
    assert send_ack(sut, CHILD_PORT, 3) == {}
    assert send_ack(sut, 2, 3) == {}
    assert send_ack(sut, 3, 3) == {1: 1}


def scenario_ack_merge_sends_up_the_lowest_claim(sut: SwitchUnderTest) -> None:
    """Issue 32, High 4: the child that completes a cell claiming cum = seg_count (a member
    that withheld its checkpoint) cannot raise what goes up: the cell's lowest claim does. A
    leader's repeat at the complete cell carries the same."""
    sut.configure(with_trees(base_state(sut)))
    assert send_ack(sut, 2, 1) == {} and send_ack(sut, CHILD_PORT, 1) == {}
    out = sut.send(3, ack_frame(3, 1, seq=SEG_COUNT))
    assert ports_of(out) == {1: 1}
    assert parsed(out)[1][0].hdr.seq == 16
    again = sut.send(2, ack_frame(2, 1, seq=SEG_COUNT))
    assert ports_of(again) == {1: 1}
    assert parsed(again)[1][0].hdr.seq == 16
    # a new epoch starts the claim again
    assert send_ack(sut, 2, 1, epoch=2, seq=SEG_COUNT) == {}
    assert send_ack(sut, 3, 1, epoch=2, seq=SEG_COUNT) == {}
    final = sut.send(CHILD_PORT, ack_frame(CHILD_PORT, 1, epoch=2, seq=SEG_COUNT))
    assert parsed(final)[1][0].hdr.seq == SEG_COUNT


ACKMERGE_SCENARIOS = [
    scenario_ack_merge_one_ack_after_every_child,
    scenario_ack_merge_inner_switch_reordering,
    scenario_ack_merge_admission_and_ranges,
    scenario_ack_merge_after_restart,
    scenario_ack_merge_sends_up_the_lowest_claim,
]
