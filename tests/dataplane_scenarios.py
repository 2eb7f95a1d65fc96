"""Single-switch scenarios, run against both the reference model (unit tier) and BMv2
(data-plane tier): a frame goes in on a port, the exact frames out on every port are checked,
and that nothing else comes out.

The switch under test has host ports 1-4 (nodes 1-4), a parent switch on port 5, a child
switch on port 6 and the management node on port 7; neighbouring switches are just ports.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from controller import wire
from controller.desired_state import replication_for
from controller.switch_state import (
    AckMerge,
    PortRole,
    SlotTree,
    StaticTree,
    SwitchState,
    TreeKey,
    ports_bitmap,
)
from controller.topology_build import single_switch
from controller.wire import DropReason, MpKind, MpStatus, Op

SWITCH_NODE = wire.switch_node_id(0)
HOST_PORTS = (1, 2, 3, 4)
PARENT_PORT = 5
CHILD_PORT = 6
MGMT_PORT = 7
ALL_PORTS = (*HOST_PORTS, PARENT_PORT, CHILD_PORT, MGMT_PORT)
PARENT_NODE = wire.switch_node_id(1)
CHILD_NODE = wire.switch_node_id(2)
COMM = 3
OTHER_COMM = 4
STATIC_GROUP = 10
REMOTE_ROOT = 9  # a host behind the parent switch: its trees enter by PARENT_PORT
ACK_BAD_SLOT = 5000  # beyond the program's ACK-merge slots


def host_mac(port: int) -> bytes:
    return wire.mac_bytes(wire.host_mac(port))


class SwitchUnderTest(Protocol):
    replication: str  # "subset" or "all_ports": how child bitmaps are replicated

    def configure(self, state: SwitchState) -> None:
        """Install tables and multicast groups (P4Runtime on BMv2), reset registers."""

    def send(self, port: int, frame: bytes) -> dict[int, list[bytes]]:
        """Inject one frame; return every frame that came out, by port."""

    def drops(self) -> Counter[int]:
        """Drop-reason counters, ingress and egress together."""

    def alive(self) -> bool: ...


def base_state(sut: SwitchUnderTest) -> SwitchState:
    replication = sut.replication
    state = SwitchState(switch=0, node_id=SWITCH_NODE)
    for port in HOST_PORTS:
        state.ports[port] = (PortRole.HOST, port)
        state.routes[port] = port
    state.ports[PARENT_PORT] = (PortRole.SWITCH, 0)
    state.ports[CHILD_PORT] = (PortRole.SWITCH, 0)
    state.ports[MGMT_PORT] = (PortRole.MGMT, wire.MGMT_NODE_ID)
    state.routes[PARENT_NODE] = PARENT_PORT
    state.routes[CHILD_NODE] = CHILD_PORT
    state.routes[wire.MGMT_NODE_ID] = MGMT_PORT
    topo = single_switch(len(ALL_PORTS) - 1)  # ports 1..7: the same port count
    state.replication, state.groups = replication_for(topo, 0, replication)
    return state


def with_trees(state: SwitchState) -> SwitchState:
    """Tree of (COMM, root 1): parent = host port 1, children = hosts 2, 3 and the child
    switch. Tree of (COMM, root 2) bound to membership slot 5 (written by MP). ACKs merged
    (common/ackmerge.p4) for (COMM, root 1) here as the root's switch, for (COMM, REMOTE_ROOT)
    as an inner switch (up PARENT_PORT, from hosts 2, 3 and the child switch), and an entry of
    OTHER_COMM naming a slot the program does not have."""
    state.trees[TreeKey(COMM, 1, wire.Tree.INNET)] = StaticTree(1, STATIC_GROUP)
    state.groups[STATIC_GROUP] = (2, 3, CHILD_PORT)
    state.trees[TreeKey(COMM, 2, wire.Tree.INNET)] = SlotTree(5)
    state.trees[TreeKey(OTHER_COMM, 4, wire.Tree.INNET)] = StaticTree(4, STATIC_GROUP + 1)
    state.groups[STATIC_GROUP + 1] = (1,)
    children = ports_bitmap((2, 3, CHILD_PORT))
    state.ack_merges[TreeKey(COMM, 1, wire.Tree.INNET)] = AckMerge(7, 1, children, 1)
    state.ack_merges[TreeKey(COMM, REMOTE_ROOT, wire.Tree.INNET)] = AckMerge(
        8, PARENT_PORT, children, 1
    )
    state.ack_merges[TreeKey(OTHER_COMM, 4, wire.Tree.INNET)] = AckMerge(
        ACK_BAD_SLOT, 4, ports_bitmap((1,)), 1
    )
    return state


def frame(
    op: int,
    *,
    src: int = 1,
    dst: int = 0,
    payload: bytes = b"",
    port: int | None = None,
    **fields: int,
) -> bytes:
    hdr = wire.Header(op=op, src_node=src, dst_node=dst, **fields)
    mac = host_mac(port if port is not None else src)
    return wire.build_frame(hdr, payload, src_mac=mac)


def mp_frame(
    kind: int,
    slot: int,
    generation: int,
    *,
    parent: int = 0,
    children: int = 0,
    epoch: int = 0,
    seq: int = 1,
) -> bytes:
    hdr = wire.Header(op=Op.MP, src_node=wire.MGMT_NODE_ID, dst_node=SWITCH_NODE, seq=seq)
    body = wire.MiniPacket(
        kind=kind,
        slot=slot,
        generation=generation,
        parent_port=parent,
        epoch=epoch,
        children=children,
    )
    return wire.build_frame(hdr, mp=body)


def parsed(out: dict[int, list[bytes]]) -> dict[int, list[wire.Frame]]:
    return {port: [wire.parse_frame(f) for f in frames] for port, frames in out.items() if frames}


def ports_of(out: dict[int, list[bytes]]) -> dict[int, int]:
    return {port: len(frames) for port, frames in out.items() if frames}


@dataclass
class Checker:
    sut: SwitchUnderTest
    drops_before: Counter[int] = field(default_factory=Counter)

    def mark(self) -> None:
        self.drops_before = Counter(self.sut.drops())

    def new_drops(self) -> Counter[int]:
        now = self.sut.drops()
        return Counter(
            {
                k: v - self.drops_before.get(k, 0)
                for k, v in now.items()
                if v - self.drops_before.get(k, 0)
            }
        )


def write_barrier(
    sut: SwitchUnderTest,
    comm: int,
    generation: int,
    *,
    parent: int,
    children: tuple[int, ...],
    epoch: int = 0,
) -> wire.MiniPacket:
    out = sut.send(
        MGMT_PORT,
        mp_frame(
            MpKind.WRITE_BARRIER,
            comm,
            generation,
            parent=parent,
            children=ports_bitmap(children),
            epoch=epoch,
        ),
    )
    replies = parsed(out)
    assert list(replies) == [MGMT_PORT], (
        f"MP reply expected on the management port, got {ports_of(out)}"
    )
    mp = replies[MGMT_PORT][0].mp
    assert mp is not None
    return mp


REPAIRS, RESENT = wire.Flag.REPLY_NOW, wire.Flag.RETRANSMIT  # barrier repair flags


def arrive(
    sut: SwitchUnderTest, port: int, epoch: int, comm: int = COMM, flags: int = 0
) -> dict[int, list[bytes]]:
    src = port if port in HOST_PORTS else (CHILD_NODE if port == CHILD_PORT else PARENT_NODE)
    hdr = {"comm_id": comm, "epoch": epoch, "flags": flags}
    return sut.send(port, frame(Op.ARRIVE, src=src, port=port, **hdr))


def release(
    sut: SwitchUnderTest, port: int, epoch: int, comm: int = COMM
) -> dict[int, list[bytes]]:
    return sut.send(port, frame(Op.RELEASE, src=PARENT_NODE, comm_id=comm, epoch=epoch, port=port))


# -- scenarios -------------------------------------------------------------------------------


def scenario_unicast(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    out = sut.send(1, frame(Op.UNICAST, src=1, dst=3, payload=b"hello"))
    got = parsed(out)
    assert list(got) == [3] and len(got[3]) == 1
    assert got[3][0].hdr.dst_node == 3 and bytes(got[3][0].payload) == b"hello"
    # to the parent switch's node and back out of the ingress port (unicast replies work)
    assert ports_of(sut.send(1, frame(Op.UNICAST, src=1, dst=PARENT_NODE))) == {PARENT_PORT: 1}
    assert ports_of(sut.send(1, frame(Op.ACK, src=1, dst=1))) == {1: 1}
    check = Checker(sut)
    check.mark()
    assert ports_of(sut.send(1, frame(Op.UNICAST, src=1, dst=999))) == {}
    assert check.new_drops()[DropReason.NO_ROUTE] == 1


def scenario_replication_exact_children(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    out = sut.send(1, frame(Op.MCAST, src=1, comm_id=COMM, root_node=1, payload=b"x" * 100))
    assert ports_of(out) == {2: 1, 3: 1, CHILD_PORT: 1}
    for frames in parsed(out).values():
        assert bytes(frames[0].payload) == b"x" * 100 and frames[0].hdr.root_node == 1


def scenario_reverse_path_drop(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    check = Checker(sut)
    check.mark()
    # root 1's tree fed from the child switch port: not its parent port
    out = sut.send(CHILD_PORT, frame(Op.MCAST, src=1, comm_id=COMM, root_node=1, port=CHILD_PORT))
    assert ports_of(out) == {}
    assert check.new_drops()[DropReason.RPF] == 1
    # a host claiming another host's tree: its own source is checked first
    check.mark()
    out = sut.send(2, frame(Op.MCAST, src=1, comm_id=COMM, root_node=1, port=2))
    assert ports_of(out) == {}
    assert check.new_drops()[DropReason.SRC_SPOOF] == 1


def scenario_barrier_release_after_exact_mask(sut: SwitchUnderTest) -> None:
    """Root switch: children hosts 1, 2, 3; RELEASE to exactly them, only after the last."""
    sut.configure(base_state(sut))
    assert write_barrier(sut, COMM, 1, parent=0, children=(1, 2, 3)).status == MpStatus.OK
    check = Checker(sut)
    check.mark()
    assert ports_of(arrive(sut, 1, 1)) == {}
    assert ports_of(arrive(sut, 1, 1)) == {}  # duplicate: still waiting for 2 and 3
    assert ports_of(arrive(sut, 2, 1)) == {}
    assert check.new_drops()[DropReason.ABSORBED] == 3
    out = arrive(sut, 3, 1)
    assert ports_of(out) == {1: 1, 2: 1, 3: 1}
    for frames in parsed(out).values():
        release = frames[0].hdr
        assert release.op == Op.RELEASE and release.epoch == 1 and release.src_node == SWITCH_NODE
    # a non-member host cannot arrive
    check.mark()
    assert ports_of(arrive(sut, 4, 2)) == {}
    assert check.new_drops()[DropReason.NOT_CHILD] == 1


def scenario_barrier_consecutive_epochs_and_late_arrive(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    arrive(sut, 1, 1)
    assert ports_of(arrive(sut, 2, 1)) == {1: 1, 2: 1}
    # epoch 2 opens; host 1 is early, host 2 retransmits its epoch-1 ARRIVE (late)
    assert ports_of(arrive(sut, 1, 2)) == {}
    late = arrive(sut, 2, 1)
    assert ports_of(late) == {2: 1}, "a late ARRIVE is answered with RELEASE to its port only"
    assert parsed(late)[2][0].hdr.op == Op.RELEASE and parsed(late)[2][0].hdr.epoch == 1
    assert ports_of(arrive(sut, 2, 2)) == {1: 1, 2: 1}
    # beyond the window of open epochs
    check = Checker(sut)
    check.mark()
    assert ports_of(arrive(sut, 1, 2 + 100)) == {}
    assert check.new_drops()[DropReason.OUT_OF_WINDOW] == 1


def scenario_barrier_non_root_sends_one_arrive_and_resends(sut: SwitchUnderTest) -> None:
    """Non-root switch: parent on port 5, children hosts 1, 2 and the child switch."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=PARENT_PORT, children=(1, 2, CHILD_PORT))
    assert ports_of(arrive(sut, 1, 1)) == {}
    assert ports_of(arrive(sut, CHILD_PORT, 1)) == {}
    out = arrive(sut, 2, 1)
    assert ports_of(out) == {PARENT_PORT: 1}
    up = parsed(out)[PARENT_PORT][0].hdr
    assert up.op == Op.ARRIVE and up.epoch == 1 and up.src_node == SWITCH_NODE
    # a duplicate child ARRIVE at the complete, not yet released switch is re-sent upward
    assert ports_of(arrive(sut, 1, 1)) == {PARENT_PORT: 1}
    # RELEASE from a non-parent port is dropped
    check = Checker(sut)
    check.mark()
    assert ports_of(release(sut, CHILD_PORT, 1)) == {}
    assert check.new_drops()[DropReason.NOT_PARENT] == 1
    # RELEASE from the parent goes to exactly the children
    assert ports_of(release(sut, PARENT_PORT, 1)) == {1: 1, 2: 1, CHILD_PORT: 1}
    # the same RELEASE again is stale; a late ARRIVE is now answered locally
    check.mark()
    assert ports_of(release(sut, PARENT_PORT, 1)) == {}
    assert check.new_drops()[DropReason.STALE_RELEASE] == 1
    assert ports_of(arrive(sut, CHILD_PORT, 1)) == {CHILD_PORT: 1}


def scenario_barrier_echoes_recorded_arrive_asking_for_it(sut: SwitchUnderTest) -> None:
    """An ARRIVE with REPLY_NOW comes back to its host once recorded, naming that host in
    dst_node (issue 33: a rank whose arrival is safe stops resending), also when it completes
    the cell and goes up; without the flag nothing changes."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=PARENT_PORT, children=(1, 2, CHILD_PORT))
    check = Checker(sut)
    check.mark()
    assert ports_of(arrive(sut, CHILD_PORT, 1)) == {}  # not asked: absorbed as before
    assert ports_of(arrive(sut, CHILD_PORT, 1, flags=REPAIRS)) == {}  # a switch: no echo
    assert check.new_drops()[DropReason.ABSORBED] == 2
    echo = arrive(sut, 1, 1, flags=REPAIRS)
    assert ports_of(echo) == {1: 1}
    back = parsed(echo)[1][0].hdr
    assert (back.op, back.epoch, back.src_node, back.dst_node) == (Op.ARRIVE, 1, SWITCH_NODE, 1)
    out = arrive(sut, 2, 1, flags=REPAIRS)  # completes the cell
    assert ports_of(out) == {PARENT_PORT: 1, 2: 1}
    for frames in parsed(out).values():
        hdr = frames[0].hdr
        assert (hdr.op, hdr.src_node, hdr.dst_node) == (Op.ARRIVE, SWITCH_NODE, 2)
    # a resend after completion goes up again and is echoed; once released, RELEASE answers
    assert ports_of(arrive(sut, 1, 1, flags=REPAIRS | RESENT)) == {PARENT_PORT: 1, 1: 1}
    release(sut, PARENT_PORT, 1)
    late = arrive(sut, 1, 1, flags=REPAIRS)
    assert ports_of(late) == {1: 1} and parsed(late)[1][0].hdr.op == Op.RELEASE


def scenario_barrier_resend_asks_the_missing_children(sut: SwitchUnderTest) -> None:
    """A resent ARRIVE (REPLY_NOW and RETRANSMIT) that finds the cell incomplete is sent down
    to the children still missing: one rank's resend repairs what the barrier lost below."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2, CHILD_PORT))
    arrive(sut, 1, 1, flags=REPAIRS)
    asked = arrive(sut, 1, 1, flags=REPAIRS | RESENT)
    assert ports_of(asked) == {1: 1, 2: 1, CHILD_PORT: 1}  # its echo, and the two missing
    for frames in parsed(asked).values():
        hdr = frames[0].hdr
        assert (hdr.op, hdr.epoch, hdr.dst_node) == (Op.ARRIVE, 1, 1)
    # a first ARRIVE asks nobody; nor does a resend when the epoch before is not released
    assert ports_of(arrive(sut, 2, 1, flags=REPAIRS)) == {2: 1}
    assert ports_of(arrive(sut, 1, 3, flags=REPAIRS | RESENT)) == {1: 1}


def scenario_barrier_switch_asked_by_its_parent(sut: SwitchUnderTest) -> None:
    """ARRIVE(e) with REPLY_NOW from the parent port: the parent released e - 1 and misses
    this subtree at e. A switch that missed RELEASE(e - 1) releases its children; one whose
    cell is complete sends its ARRIVE up again; one whose cell is not asks its own missing."""
    sut.configure(base_state(sut))
    write_barrier(sut, COMM, 1, parent=PARENT_PORT, children=(1, 2, CHILD_PORT))

    def ask(epoch: int) -> dict[int, list[bytes]]:
        hdr = {"comm_id": COMM, "epoch": epoch, "flags": REPAIRS | RESENT}
        return sut.send(PARENT_PORT, frame(Op.ARRIVE, src=PARENT_NODE, port=PARENT_PORT, **hdr))

    missed = ask(2)  # RELEASE(1) never came here
    assert ports_of(missed) == {1: 1, 2: 1, CHILD_PORT: 1}
    assert {(f[0].hdr.op, f[0].hdr.epoch) for f in parsed(missed).values()} == {(Op.RELEASE, 1)}
    for port in (1, 2):
        arrive(sut, port, 2)
    lower = ask(2)  # the child switch has not arrived: it is asked in turn
    assert ports_of(lower) == {CHILD_PORT: 1}
    assert parsed(lower)[CHILD_PORT][0].hdr.op == Op.ARRIVE
    out = arrive(sut, CHILD_PORT, 2)
    assert ports_of(out) == {PARENT_PORT: 1}  # complete: up, as ever
    again = ask(2)  # that ARRIVE was lost: the ask brings it again, asking nothing itself
    assert ports_of(again) == {PARENT_PORT: 1}
    up = parsed(again)[PARENT_PORT][0].hdr
    assert (up.op, up.epoch, up.src_node, up.flags & RESENT) == (Op.ARRIVE, 2, SWITCH_NODE, 0)
    release(sut, PARENT_PORT, 2)
    check = Checker(sut)
    check.mark()
    assert ports_of(ask(2)) == {}  # released since
    assert check.new_drops()[DropReason.STALE_RELEASE] == 1
    # without REPLY_NOW an ARRIVE from the parent is what it always was
    check.mark()
    sut.send(
        PARENT_PORT, frame(Op.ARRIVE, src=PARENT_NODE, port=PARENT_PORT, comm_id=COMM, epoch=3)
    )
    assert check.new_drops()[DropReason.NOT_CHILD] == 1


def scenario_two_communicators_isolated(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    write_barrier(sut, COMM, 1, parent=0, children=(1, 2))
    write_barrier(sut, OTHER_COMM, 1, parent=0, children=(2, 3))
    arrive(sut, 1, 1, COMM)
    # host 2 arriving on the other communicator does not complete COMM
    assert ports_of(arrive(sut, 2, 1, OTHER_COMM)) == {}
    assert ports_of(arrive(sut, 2, 1, COMM)) == {1: 1, 2: 1}
    assert ports_of(arrive(sut, 3, 1, OTHER_COMM)) == {2: 1, 3: 1}
    # broadcast trees are per communicator too
    out = sut.send(4, frame(Op.MCAST, src=4, comm_id=OTHER_COMM, root_node=4))
    assert ports_of(out) == {1: 1}


def scenario_mp_changes_replication(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    check = Checker(sut)
    check.mark()
    # slot 5 not written yet: unknown tree
    assert ports_of(sut.send(2, frame(Op.MCAST, src=2, comm_id=COMM, root_node=2))) == {}
    assert check.new_drops()[DropReason.UNKNOWN_TREE] == 1
    reply = parsed(
        sut.send(
            MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 5, 1, parent=2, children=ports_bitmap((1, 4)))
        )
    )
    assert reply[MGMT_PORT][0].mp.status == MpStatus.OK  # type: ignore[union-attr]
    assert (
        reply[MGMT_PORT][0].hdr.op == Op.MP_REPLY
        and reply[MGMT_PORT][0].hdr.dst_node == wire.MGMT_NODE_ID
    )
    assert ports_of(sut.send(2, frame(Op.MCAST, src=2, comm_id=COMM, root_node=2))) == {1: 1, 4: 1}
    sut.send(
        MGMT_PORT,
        mp_frame(MpKind.WRITE_TREE, 5, 2, parent=2, children=ports_bitmap((3, PARENT_PORT))),
    )
    assert ports_of(sut.send(2, frame(Op.MCAST, src=2, comm_id=COMM, root_node=2))) == {
        3: 1,
        PARENT_PORT: 1,
    }
    # read back
    read = parsed(sut.send(MGMT_PORT, mp_frame(MpKind.READ_TREE, 5, 0)))[MGMT_PORT][0].mp
    assert (
        read is not None
        and read.parent_port == 2
        and read.children == ports_bitmap((3, PARENT_PORT))
    )
    assert read.generation == 2


def scenario_mp_from_host_port_dropped(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    sut.send(MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 5, 1, parent=2, children=ports_bitmap((1,))))
    check = Checker(sut)
    check.mark()
    for port in HOST_PORTS:
        spoofed = mp_frame(
            MpKind.WRITE_TREE, 5, 100 + port, parent=port, children=ports_bitmap((4,))
        )
        assert ports_of(sut.send(port, spoofed)) == {}
        # whatever its target: aimed at the next switch it is not forwarded either
        hdr = wire.Header(op=Op.MP, src_node=wire.MGMT_NODE_ID, dst_node=PARENT_NODE, seq=9)
        onward = wire.build_frame(
            hdr, mp=wire.MiniPacket(kind=MpKind.WRITE_TREE, slot=1, generation=7)
        )
        assert ports_of(sut.send(port, onward)) == {}
    assert check.new_drops()[DropReason.MP_FROM_HOST] == 2 * len(HOST_PORTS)
    # nothing changed: the slot still holds generation 1's content
    assert ports_of(sut.send(2, frame(Op.MCAST, src=2, comm_id=COMM, root_node=2))) == {1: 1}


def scenario_stale_mp_rejected(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    sut.send(MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 5, 10, parent=2, children=ports_bitmap((1,))))
    check = Checker(sut)
    check.mark()
    stale = parsed(
        sut.send(
            MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 5, 9, parent=2, children=ports_bitmap((4,)))
        )
    )
    assert stale[MGMT_PORT][0].mp.status == MpStatus.STALE  # type: ignore[union-attr]
    duplicate = parsed(
        sut.send(
            MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 5, 10, parent=2, children=ports_bitmap((4,)))
        )
    )
    assert duplicate[MGMT_PORT][0].mp.status == MpStatus.DUPLICATE  # type: ignore[union-attr]
    drops = check.new_drops()
    assert drops[DropReason.MP_STALE] == 1 and drops[DropReason.MP_DUPLICATE] == 1
    assert ports_of(sut.send(2, frame(Op.MCAST, src=2, comm_id=COMM, root_node=2))) == {1: 1}
    # a forwarded MP for another switch leaves by the route to it
    hdr = wire.Header(op=Op.MP, src_node=wire.MGMT_NODE_ID, dst_node=PARENT_NODE, seq=3)
    onward = wire.build_frame(hdr, mp=wire.MiniPacket(kind=MpKind.WRITE_TREE, slot=1, generation=1))
    assert ports_of(sut.send(MGMT_PORT, onward)) == {PARENT_PORT: 1}


def scenario_out_of_range_indices(sut: SwitchUnderTest) -> None:
    sut.configure(with_trees(base_state(sut)))
    check = Checker(sut)
    check.mark()
    bad = [
        (MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 0xFFFF, 1, parent=1, children=1)),
        (MGMT_PORT, mp_frame(MpKind.WRITE_BARRIER, 0xFFFF, 1, parent=1, children=1)),
        (MGMT_PORT, mp_frame(MpKind.READ_BARRIER, 0x8000, 0)),
        (MGMT_PORT, mp_frame(99, 1, 1)),
        (1, frame(Op.ARRIVE, src=1, comm_id=0xFFFF, epoch=1)),
        (1, frame(Op.ARRIVE, src=1, comm_id=200, epoch=1)),  # in range, never configured
        (1, frame(0, src=1)),
        (1, frame(200, src=1)),
        (1, frame(Op.MCAST, src=1, comm_id=0xFFFF, root_node=0xFFFF, tree=0xFF)),
        (1, frame(Op.UNICAST, src=1, dst=0xFFFF)),
    ]
    for port, data in bad:
        out = sut.send(port, data)
        if port == MGMT_PORT and parsed(out):
            assert parsed(out)[MGMT_PORT][0].mp.status in (MpStatus.BAD_SLOT, MpStatus.BAD_KIND)  # type: ignore[union-attr]
        else:
            assert ports_of(out) == {}
    drops = check.new_drops()
    assert drops[DropReason.MP_BAD_SLOT] == 3 and drops[DropReason.MP_BAD_KIND] == 1
    assert drops[DropReason.COMM_RANGE] == 1 and drops[DropReason.BARRIER_UNCONFIGURED] == 1
    assert drops[DropReason.BAD_OP] == 2 and drops[DropReason.UNKNOWN_TREE] == 1
    assert drops[DropReason.NO_ROUTE] == 1
    assert sut.alive()
    assert ports_of(sut.send(1, frame(Op.UNICAST, src=1, dst=2))) == {2: 1}


def scenario_malformed(sut: SwitchUnderTest) -> None:
    sut.configure(base_state(sut))
    check = Checker(sut)
    check.mark()
    good = frame(Op.UNICAST, src=1, dst=2, payload=b"abcdef")
    truncated_header = good[: wire.ETH_HEADER_LEN + 20]
    short_payload = good[:-3]  # payload_len says 6, only 3 bytes follow
    wrong_version = good[:14] + b"\x07" + good[15:]
    for data in (truncated_header, short_payload, wrong_version):
        assert ports_of(sut.send(1, data)) == {}
    assert check.new_drops()[DropReason.MALFORMED] == 3
    other = b"\xff" * 6 + host_mac(1) + b"\x86\xdd" + b"\x00" * 40  # IPv6
    assert ports_of(sut.send(1, other)) == {}
    assert check.new_drops()[DropReason.NON_COLLECTIVE] == 1


SCENARIOS = [
    scenario_unicast,
    scenario_replication_exact_children,
    scenario_reverse_path_drop,
    scenario_barrier_release_after_exact_mask,
    scenario_barrier_consecutive_epochs_and_late_arrive,
    scenario_barrier_non_root_sends_one_arrive_and_resends,
    scenario_barrier_echoes_recorded_arrive_asking_for_it,
    scenario_barrier_resend_asks_the_missing_children,
    scenario_barrier_switch_asked_by_its_parent,
    scenario_two_communicators_isolated,
    scenario_mp_changes_replication,
    scenario_mp_from_host_port_dropped,
    scenario_stale_mp_rejected,
    scenario_out_of_range_indices,
    scenario_malformed,
]
