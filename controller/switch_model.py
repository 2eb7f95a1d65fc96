"""Reference model of the netcoll switch: the P4 program's behaviour in plain Python.

It executes a :class:`~controller.switch_state.SwitchState` the way the P4 program does, packet
for packet: the same classification order, the same register updates, the same drop reasons
and counters. Tests of other rooms (the in-process fabric of the host agents, the controller)
use it as a switch, and ``tests/dataplane`` checks it against BMv2 on random event sequences.
Keep it in step with ``p4src/common``: each function names the P4 control it mirrors.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from controller import wire
from controller.switch_barrier import BarrierView, barrier_decide
from controller.switch_frames import Parsed as Parsed
from controller.switch_frames import deparse as deparse
from controller.switch_frames import parse as parse
from controller.switch_reduce import (
    agg_admission_with_asks,
    agg_header_reason,
    agg_repair,
    reduce_decide,
)
from controller.switch_rules import AGG_RESULT_KNOWN as AGG_RESULT_KNOWN
from controller.switch_rules import MASK16 as MASK16
from controller.switch_rules import MASK32 as MASK32
from controller.switch_rules import AggKey as AggKey
from controller.switch_rules import AggVerdict as AggVerdict
from controller.switch_rules import LaneMode as LaneMode
from controller.switch_rules import ack_cum_merge as ack_cum_merge
from controller.switch_rules import ack_sends_up as ack_sends_up
from controller.switch_rules import agg_admission_reason as agg_admission_reason
from controller.switch_rules import agg_classify as agg_classify
from controller.switch_rules import agg_epoch_in_window as agg_epoch_in_window
from controller.switch_rules import agg_key_relation as agg_key_relation
from controller.switch_rules import epoch_after as epoch_after
from controller.switch_rules import generation_status as generation_status
from controller.switch_state import (
    BarrierSlot,
    PortRole,
    ReplicationMode,
    Sizes,
    SlotTree,
    StaticTree,
    SwitchState,
    TreeKey,
    TreeSlot,
)
from controller.wire import DropReason, Flag, MpKind, MpStatus, Op

OUT_DROP, OUT_UNICAST, OUT_MCAST, OUT_REPLY = range(4)
COLUMN_OTHER, COLUMN_IPV4, COLUMN_BAD_OP = 0, 14, 15


@dataclass(slots=True)
class Decision:
    """coll_meta_t fields that decide the packet's fate."""

    out_kind: int = OUT_DROP
    out_port: int = 0
    mcast_grp: int = 0
    mcast_children: int = 0
    filter_children: bool = False
    prune_ingress: bool = False
    drop_reason: int = DropReason.NONE


@dataclass(slots=True)
class Outcome:
    outputs: list[tuple[int, bytes]] = field(default_factory=list)
    ingress_reason: int = DropReason.NONE
    egress_reasons: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Counters:
    rx: Counter[tuple[int, int]] = field(default_factory=Counter)  # (port, column) -> packets
    rx_bytes: Counter[tuple[int, int]] = field(default_factory=Counter)
    tx: Counter[tuple[int, int]] = field(default_factory=Counter)
    tx_bytes: Counter[tuple[int, int]] = field(default_factory=Counter)
    drops: Counter[int] = field(default_factory=Counter)  # ingress reason -> packets
    egress_drops: Counter[int] = field(default_factory=Counter)


class SwitchModel:
    """One switch: its tables (from a SwitchState) and its registers (written by MPs)."""

    def __init__(self, state: SwitchState, sizes: Sizes | None = None) -> None:
        self.sizes = sizes or Sizes()
        self.state = state
        self.counters = Counters()
        s = self.sizes
        self.tree_parent = [0] * s.tree_slots
        self.tree_children = [0] * s.tree_slots
        self.tree_generation = [0] * s.tree_slots
        self.barrier_child_mask = [0] * s.comm_slots
        self.barrier_parent = [0] * s.comm_slots
        self.barrier_generation = [0] * s.comm_slots
        self.barrier_released = [0] * s.comm_slots
        self.barrier_cells = [(0, 0)] * (s.comm_slots * s.barrier_window)  # (tag, bitmap)
        self.agg_key = [(0, 0)] * s.agg_slots  # (tag, owner)
        self.agg_arrived = [0] * s.agg_slots
        self.agg_lanes = [0] * (s.agg_slots * s.agg_lanes)
        self.agg_completed = [0] * s.comm_slots  # the tag the root completed last, per comm
        self.ack_cells = [(0, 0)] * (s.ack_slots * s.ack_window)  # (tag, child bitmap)
        self.ack_cums = [(0, 0)] * (s.ack_slots * s.ack_window)  # (tag, lowest cum claimed)

    # -- register writes the control plane makes by mini packet, applied directly ----------

    def write_tree_slot(self, slot: int, content: TreeSlot, generation: int) -> MpStatus:
        return self._write_tree(slot, generation, content.parent_port, content.children)

    def write_barrier_slot(self, comm: int, content: BarrierSlot, generation: int) -> MpStatus:
        return self._write_barrier(
            comm, generation, content.parent_port, content.child_mask, content.base_epoch
        )

    # -- the pipeline -------------------------------------------------------------------------

    def port_bit(self, port: int) -> int:
        """v1model/state.p4 port_bit."""
        return 1 << (port - 1) if 1 <= port < self.sizes.max_ports else 0

    def process(self, frame: bytes, in_port: int) -> Outcome:
        parsed = parse(frame, self.sizes.agg_lanes)
        decision = Decision()
        self._ingress(parsed, in_port, len(frame), decision)
        outcome = Outcome(ingress_reason=decision.drop_reason)
        if self.port_bit(in_port):
            column = self._column(parsed)
            self.counters.rx[(in_port, column)] += 1
            self.counters.rx_bytes[(in_port, column)] += len(frame)
        if decision.drop_reason != DropReason.NONE:
            self.counters.drops[decision.drop_reason] += 1
        if decision.out_kind == OUT_DROP:
            return outcome
        out = deparse(parsed)
        if decision.out_kind == OUT_UNICAST:
            self._egress(outcome, parsed, out, decision.out_port, decision, replica=False)
        elif decision.out_kind == OUT_REPLY:
            self._egress(outcome, parsed, out, in_port, decision, replica=False)
        else:
            for port in self.state.groups.get(decision.mcast_grp, ()):
                self._egress(outcome, parsed, out, port, decision, replica=True, in_port=in_port)
        return outcome

    def _egress(
        self,
        outcome: Outcome,
        parsed: Parsed,
        out: bytes,
        port: int,
        decision: Decision,
        *,
        replica: bool,
        in_port: int = 0,
    ) -> None:
        """v1model V1Egress with common/egress.p4 replica_drop_reason."""
        reason: int = DropReason.NONE
        if replica:
            if decision.prune_ingress and port == in_port:
                reason = DropReason.PRUNED
            elif decision.filter_children and not decision.mcast_children & self.port_bit(port):
                reason = DropReason.FILTERED
        if reason != DropReason.NONE:
            self.counters.egress_drops[reason] += 1
            outcome.egress_reasons.append(reason)
            return
        if self.port_bit(port):
            column = self._column(parsed)
            self.counters.tx[(port, column)] += 1
            self.counters.tx_bytes[(port, column)] += len(out)
        outcome.outputs.append((port, out))

    @staticmethod
    def _column(parsed: Parsed) -> int:
        """common/forwarding.p4 counter_column."""
        if parsed.coll is not None:
            op = parsed.coll.op
            return COLUMN_BAD_OP if op == 0 or op > wire.OP_MAX else op
        if parsed.ipv4_dst is not None:
            return COLUMN_IPV4
        return COLUMN_OTHER

    def _ingress(self, parsed: Parsed, in_port: int, frame_len: int, d: Decision) -> None:
        """common/ingress.p4 NetcollIngress."""
        klass = self._classify(parsed, in_port, frame_len, d)
        if klass is None:
            return
        coll = parsed.coll
        if klass == "route":
            self._route(parsed, d)
        elif klass == "mcast":
            assert coll is not None
            self._broadcast(coll, in_port, d)
        elif klass == "barrier":
            assert coll is not None
            if coll.comm_id >= self.sizes.comm_slots:
                d.drop_reason = DropReason.COMM_RANGE
            else:
                self._barrier(parsed, in_port, d)
        elif klass == "agg":
            assert coll is not None
            d.drop_reason = agg_header_reason(coll, self.sizes.comm_slots)
            if d.drop_reason == DropReason.NONE:
                self._reduce(parsed, in_port, d)
        elif klass == "ack_merge":
            assert coll is not None
            self._ack_merge(parsed, in_port, d)
        elif klass == "local":
            self._local(parsed, d)
        if d.out_kind == OUT_MCAST and d.filter_children:
            self._child_replication(d)

    def _classify(self, parsed: Parsed, in_port: int, frame_len: int, d: Decision) -> str | None:
        """common/forwarding.p4 Classify; returns the class or None when rejected."""

        def reject(reason: DropReason) -> None:
            d.drop_reason = reason

        if not self.port_bit(in_port):
            reject(DropReason.PORT_RANGE)
            return None
        role, port_node = self.state.ports.get(in_port, (PortRole.HOST, 0))
        my_node = self.state.node_id
        is_host_port = role == PortRole.HOST
        coll = parsed.coll
        if parsed.parse_error:
            reject(DropReason.MALFORMED)
            return None
        if coll is not None:
            addressed_to_me = my_node != 0 and coll.dst_node == my_node
            needed = (
                wire.ETH_HEADER_LEN
                + wire.HEADER_LEN
                + (wire.MP_LEN if parsed.mp is not None else 0)
                + coll.payload_len
            )
            if coll.version != wire.PROTOCOL_VERSION:
                reject(DropReason.MALFORMED)
            elif coll.op == 0 or coll.op > wire.OP_MAX:
                reject(DropReason.BAD_OP)
            elif frame_len < needed:
                reject(DropReason.MALFORMED)
            elif coll.op in (Op.MP, Op.MP_REPLY):
                if is_host_port:
                    reject(DropReason.MP_FROM_HOST)
                elif addressed_to_me:
                    if coll.op == Op.MP:
                        return "local"
                    reject(DropReason.MP_BAD_KIND)
                else:
                    return "route"
            elif is_host_port and coll.src_node != port_node:
                reject(DropReason.SRC_SPOOF)
            elif coll.op == Op.MCAST:
                return "mcast"
            elif coll.op in (Op.ARRIVE, Op.RELEASE):
                return "barrier"
            elif coll.op in wire.AGG_OPS:
                if coll.payload_len != self.sizes.agg_payload_bytes:
                    reject(DropReason.MALFORMED)
                else:
                    return "agg"
            elif coll.op == Op.ACK and coll.flags & wire.Flag.MERGE:
                return "ack_merge"
            elif coll.op == Op.PING and addressed_to_me:
                return "local"
            else:
                return "route"
            return None
        if parsed.ipv4_dst is not None:
            assert parsed.ipv4_src is not None
            if parsed.ipv4_dst >> 16 != (wire.IPV4_PREFIX >> 16):
                reject(DropReason.NON_COLLECTIVE)
            elif is_host_port and parsed.ipv4_src & MASK16 != port_node:
                reject(DropReason.SRC_SPOOF)
            else:
                return "route"
            return None
        reject(DropReason.NON_COLLECTIVE)
        return None

    def _route(self, parsed: Parsed, d: Decision) -> None:
        """common/forwarding.p4 Route."""
        if parsed.coll is not None:
            key = parsed.coll.dst_node
        else:
            assert parsed.ipv4_dst is not None
            key = parsed.ipv4_dst & MASK16
        port = self.state.routes.get(key)
        if port is None:
            d.drop_reason = DropReason.NO_ROUTE
        else:
            d.out_kind = OUT_UNICAST
            d.out_port = port

    def _broadcast(self, coll: wire.Header, in_port: int, d: Decision) -> None:
        """common/broadcast.p4 BroadcastLookup, TreeState read, BroadcastDecide."""
        binding = self.state.trees.get(TreeKey(coll.comm_id, coll.root_node, coll.tree))
        if binding is None:
            d.drop_reason = DropReason.UNKNOWN_TREE
            return
        if isinstance(binding, StaticTree):
            parent, group, children = binding.parent_port, binding.group, 0
        else:
            if binding.slot >= self.sizes.tree_slots:
                d.drop_reason = DropReason.UNKNOWN_TREE
                return
            parent = self.tree_parent[binding.slot]
            children = self.tree_children[binding.slot]
            group = 0
            if parent == 0 and children == 0:
                d.drop_reason = DropReason.UNKNOWN_TREE
                return
        if in_port != parent:
            d.drop_reason = DropReason.RPF
        elif isinstance(binding, SlotTree):
            if children == 0:
                d.drop_reason = DropReason.EMPTY_TREE
            else:
                d.out_kind = OUT_MCAST
                d.mcast_children = children
                d.filter_children = True
                d.prune_ingress = True
        elif group == 0:
            d.drop_reason = DropReason.EMPTY_TREE
        else:
            d.out_kind = OUT_MCAST
            d.mcast_grp = group
            d.prune_ingress = True

    def _child_replication(self, d: Decision) -> None:
        """common/broadcast.p4 ChildReplication."""
        replication = self.state.replication
        if replication is None or replication.group == 0:
            d.out_kind = OUT_DROP
            d.drop_reason = DropReason.EMPTY_TREE
        elif replication.mode == ReplicationMode.SUBSET_GROUPS:
            d.mcast_grp = (replication.group + d.mcast_children) & MASK16
        else:
            d.mcast_grp = replication.group

    def _barrier(self, parsed: Parsed, in_port: int, d: Decision) -> None:
        """v1model/state.p4 BarrierState (event) and common/barrier.p4 BarrierDecide."""
        coll = parsed.coll
        assert coll is not None
        slot = coll.comm_id
        child_mask = self.barrier_child_mask[slot]
        parent = self.barrier_parent[slot]
        generation16 = self.barrier_generation[slot] & MASK16
        released = self.barrier_released[slot]
        in_bit = self.port_bit(in_port)
        epoch = coll.epoch
        verdict = None
        if child_mask == 0:
            d.drop_reason = DropReason.BARRIER_UNCONFIGURED
        elif coll.op == Op.ARRIVE:
            if not child_mask & in_bit:
                d.drop_reason = DropReason.NOT_CHILD
                if coll.flags & Flag.REPLY_NOW and parent != 0 and in_port == parent:
                    d.drop_reason, verdict = DropReason.NONE, "asked"
            elif not epoch_after(epoch, released):
                verdict = "answer"
            elif (epoch - released) & MASK16 > self.sizes.barrier_window:
                d.drop_reason = DropReason.OUT_OF_WINDOW
            else:
                verdict = "count"
        else:
            if parent == 0 or in_port != parent:
                d.drop_reason = DropReason.NOT_PARENT
            elif not epoch_after(epoch, released):
                d.drop_reason = DropReason.STALE_RELEASE
            else:
                verdict = "advance"

        index = slot * self.sizes.barrier_window + (epoch & (self.sizes.barrier_window - 1))
        tag = (epoch << 16) | generation16
        cell_tag, stored = self.barrier_cells[index]
        arrived = (stored if cell_tag == tag else 0) | (in_bit if verdict == "count" else 0)
        if verdict == "count":
            self.barrier_cells[index] = (tag, arrived)
            if arrived == child_mask and parent == 0:
                self.barrier_released[slot] = epoch
        elif verdict == "asked":
            if epoch_after((epoch - 1) & MASK16, released):
                self.barrier_released[slot] = (epoch - 1) & MASK16
        elif verdict == "advance":
            self.barrier_released[slot] = epoch

        if d.drop_reason != DropReason.NONE:
            return
        echo_to = (
            in_bit if self.state.ports.get(in_port, (PortRole.HOST,))[0] == PortRole.HOST else 0
        )
        me, parent_bit = self.state.node_id, self.port_bit(parent)
        out = barrier_decide(
            coll,
            verdict or "",
            BarrierView(child_mask, parent, parent_bit, released, arrived, echo_to, me),
        )
        d.drop_reason = out.drop
        if out.coll is not None:
            parsed.coll = out.coll
            d.out_kind = {"reply": OUT_REPLY, "mcast": OUT_MCAST, "unicast": OUT_UNICAST}[out.kind]
            d.mcast_children, d.filter_children = out.children, out.kind == "mcast"
            d.out_port = parent if out.kind == "unicast" else 0

    def _ack_merge(self, parsed: Parsed, in_port: int, d: Decision) -> None:
        """common/ackmerge.p4 AckMergeLookup, AckState (v1model merge_ack) and AckMergeDecide."""
        coll = parsed.coll
        assert coll is not None
        entry = self.state.ack_merges.get(TreeKey(coll.comm_id, coll.root_node, coll.tree))
        if (
            entry is None
            or not 0 <= entry.slot < self.sizes.ack_slots
            or entry.parent_port == 0
            or entry.child_mask == 0
        ):
            d.drop_reason = DropReason.ACK_UNCONFIGURED
            return
        in_bit = self.port_bit(in_port)
        if not entry.child_mask & in_bit:
            d.drop_reason = DropReason.ACK_NOT_CHILD
            return
        checkpoint = coll.seg_idx
        if not (1 <= checkpoint <= MASK16 and 1 <= coll.seq <= coll.seg_count):
            d.drop_reason = DropReason.ACK_RANGE
            return
        window = self.sizes.ack_window
        index = entry.slot * window + (checkpoint & (window - 1))
        tag = (coll.epoch << 16) | ((entry.generation & 0xFF) << 8) | (checkpoint & 0xFF)
        cell_tag, stored = self.ack_cells[index]
        previous = stored if cell_tag == tag else 0
        self.ack_cells[index] = (tag, previous | in_bit)
        cum_tag, stored_cum = self.ack_cums[index]
        cum = ack_cum_merge(cum_tag, stored_cum, tag, coll.seq)
        self.ack_cums[index] = (tag, cum)
        if not ack_sends_up(previous, in_bit, entry.child_mask):
            d.drop_reason = DropReason.ABSORBED
            return
        parsed.coll = coll.with_(src_node=self.state.node_id, seq=cum)
        d.out_kind = OUT_UNICAST
        d.out_port = entry.parent_port

    def _reduce(self, parsed: Parsed, in_port: int, d: Decision) -> None:
        """v1model/state.p4 BarrierState (read_config, AggState, advance_released) and
        common/reduce.p4 AggClassify, agg_repair, agg_releases_epoch and ReduceDecide."""
        coll, lanes = parsed.coll, parsed.agg
        assert coll is not None and lanes is not None
        comm = coll.comm_id
        child_mask = self.barrier_child_mask[comm]
        parent = self.barrier_parent[comm]
        in_bit = self.port_bit(in_port)
        is_result = coll.op == Op.RESULT
        reason = agg_admission_with_asks(
            agg_admission_reason(coll.op, in_port, in_bit, child_mask, parent), in_port, parent
        )
        if reason == DropReason.NONE and not agg_epoch_in_window(
            coll.op, coll.epoch, self.barrier_released[comm], self.sizes.barrier_window
        ):
            reason = DropReason.OUT_OF_WINDOW
        if reason != DropReason.NONE:
            d.drop_reason = reason
            return
        window = self.sizes.agg_window
        slot = comm * window + (coll.seg_idx & (window - 1))
        tag = ((coll.epoch << 16) | (coll.seg_idx & MASK16)) & MASK32
        owner = (1 << 16) | (self.barrier_generation[comm] & MASK16)
        stored_tag, stored_owner = self.agg_key[slot]
        relation = agg_key_relation(stored_tag, stored_owner, tag, owner)
        if relation == AggKey.STALE:
            d.drop_reason = DropReason.AGG_STALE
            return
        fresh = relation == AggKey.FRESH
        asked = not is_result and not in_bit & child_mask  # records nothing, takes no slot
        if fresh and not asked:
            self.agg_key[slot] = (tag, owner)
        stored = self.agg_arrived[slot]
        previous = 0 if fresh else stored
        if not asked:
            self.agg_arrived[slot] = (
                child_mask | AGG_RESULT_KNOWN if is_result else previous | in_bit
            )
        classified = agg_classify(is_result, fresh, previous, in_bit, child_mask, parent)
        verdict, lane_mode, reason = agg_repair(coll, previous, in_bit, child_mask, classified)
        self._agg_lanes(slot, lane_mode, wire.AggOp(coll.tree), lanes)
        # agg_releases_epoch: instances are barrier epochs, so the last chunk's RESULT moves
        # released on like a barrier (later barriers stay in their window)
        last_chunk = coll.seg_idx + 1 == coll.seg_count
        released = self.barrier_released[comm]
        if verdict == AggVerdict.DISTRIBUTE and last_chunk and epoch_after(coll.epoch, released):
            self.barrier_released[comm] = coll.epoch
        if reason != DropReason.NONE:
            d.drop_reason = reason
            return
        if verdict == AggVerdict.ABSORB:
            d.drop_reason = DropReason.ABSORBED
            return
        assert verdict is not None
        before = 0
        if verdict == AggVerdict.DISTRIBUTE and not is_result:  # only the root's completion
            before, self.agg_completed[comm] = self.agg_completed[comm], tag
        out = reduce_decide(coll, verdict, child_mask, previous, self.state.node_id, before)
        parsed.coll = out.coll
        d.out_kind = {"reply": OUT_REPLY, "mcast": OUT_MCAST, "unicast": OUT_UNICAST}[out.kind]
        d.mcast_children, d.filter_children = out.children, out.kind == "mcast"
        d.out_port = parent if out.kind == "unicast" else 0

    def _agg_lanes(self, slot: int, mode: LaneMode, op: wire.AggOp, lanes: list[int]) -> None:
        """v1model/state.p4 AggState set_lanes, combine_lanes, read_lanes: the packet's lanes
        become the slot's after the update."""
        base = slot * self.sizes.agg_lanes
        for i, offered in enumerate(lanes):
            if mode == LaneMode.SET:
                self.agg_lanes[base + i] = offered
            elif mode == LaneMode.COMBINE:
                value = wire.agg_combine(op, self.agg_lanes[base + i], offered) & MASK32
                self.agg_lanes[base + i] = lanes[i] = value
            elif mode == LaneMode.READ:
                lanes[i] = self.agg_lanes[base + i]

    def _local(self, parsed: Parsed, d: Decision) -> None:
        """MembershipCheck, the state controls' MP paths, and LocalReply."""
        coll = parsed.coll
        assert coll is not None
        reply = coll.with_(dst_node=coll.src_node, src_node=self.state.node_id)
        d.out_kind = OUT_REPLY
        if coll.op == Op.PING:
            parsed.coll = reply.with_(op=Op.PONG)
            return
        mp = parsed.mp
        assert mp is not None
        status, mp = self._membership(mp)
        parsed.coll = reply.with_(op=Op.MP_REPLY)
        parsed.mp = wire.MiniPacket(
            kind=mp.kind,
            status=status,
            slot=mp.slot,
            generation=mp.generation,
            parent_port=mp.parent_port,
            epoch=mp.epoch,
            children=mp.children,
            aux=mp.aux,
        )
        reasons = {
            MpStatus.STALE: DropReason.MP_STALE,
            MpStatus.DUPLICATE: DropReason.MP_DUPLICATE,
            MpStatus.BAD_SLOT: DropReason.MP_BAD_SLOT,
            MpStatus.BAD_KIND: DropReason.MP_BAD_KIND,
        }
        d.drop_reason = reasons.get(status, DropReason.NONE)

    def _membership(self, mp: wire.MiniPacket) -> tuple[MpStatus, wire.MiniPacket]:
        if mp.kind in (MpKind.WRITE_TREE, MpKind.READ_TREE):
            if mp.slot >= self.sizes.tree_slots:
                return MpStatus.BAD_SLOT, mp
            if mp.kind == MpKind.WRITE_TREE:
                return self._write_tree(mp.slot, mp.generation, mp.parent_port, mp.children), mp
            return MpStatus.OK, wire.MiniPacket(
                kind=mp.kind,
                slot=mp.slot,
                generation=self.tree_generation[mp.slot],
                parent_port=self.tree_parent[mp.slot],
                epoch=mp.epoch,
                children=self.tree_children[mp.slot],
                aux=mp.aux,
            )
        if mp.kind in (MpKind.WRITE_BARRIER, MpKind.READ_BARRIER):
            if mp.slot >= self.sizes.comm_slots:
                return MpStatus.BAD_SLOT, mp
            if mp.kind == MpKind.WRITE_BARRIER:
                status = self._write_barrier(
                    mp.slot, mp.generation, mp.parent_port, mp.children, mp.epoch
                )
                return status, mp
            return MpStatus.OK, self._read_barrier(mp)
        return MpStatus.BAD_KIND, mp

    def _write_tree(self, slot: int, generation: int, parent: int, children: int) -> MpStatus:
        status = generation_status(generation, self.tree_generation[slot])
        if status == MpStatus.OK:
            self.tree_generation[slot] = generation
            self.tree_parent[slot] = parent
            self.tree_children[slot] = children
        return status

    def _write_barrier(
        self, slot: int, generation: int, parent: int, child_mask: int, base_epoch: int
    ) -> MpStatus:
        status = generation_status(generation, self.barrier_generation[slot])
        if status == MpStatus.OK:
            self.barrier_generation[slot] = generation
            self.barrier_child_mask[slot] = child_mask
            self.barrier_parent[slot] = parent
            self.barrier_released[slot] = base_epoch & MASK16
        return status

    def _read_barrier(self, mp: wire.MiniPacket) -> wire.MiniPacket:
        slot = mp.slot
        generation = self.barrier_generation[slot]
        released = self.barrier_released[slot]
        open_epoch = (released + 1) & MASK16
        window = self.sizes.barrier_window
        cell_tag, arrived = self.barrier_cells[slot * window + (open_epoch & (window - 1))]
        tag = (open_epoch << 16) | (generation & MASK16)
        return wire.MiniPacket(
            kind=mp.kind,
            slot=slot,
            generation=generation,
            parent_port=self.barrier_parent[slot],
            epoch=released,
            children=self.barrier_child_mask[slot],
            aux=arrived if cell_tag == tag else 0,
        )
