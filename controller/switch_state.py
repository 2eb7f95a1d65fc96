"""Desired state of one switch, as plain data.

The controller computes a :class:`SwitchState` per switch before any driver touches a switch.
Drivers push it (P4Runtime for tables and multicast groups, mini packets for register slots),
the reference model (:mod:`controller.switch_model`) executes it, and the Tofino mapping
translates it; all three read the same objects.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from controller import wire


class PortRole(enum.IntEnum):
    HOST = 0
    SWITCH = 1
    MGMT = 2


class ReplicationMode(enum.IntEnum):
    SUBSET_GROUPS = 1  # one pre-installed multicast group per subset of ports
    ALL_PORTS = 2  # one group with every port, replicas filtered in egress by the bitmap


@dataclass(frozen=True, slots=True)
class Sizes:
    """Capacities of the compiled program (read from P4Info by :mod:`controller.p4info`)."""

    max_ports: int = 32
    comm_slots: int = 256
    barrier_window: int = 4
    tree_slots: int = 1024
    node_routes: int = 8192
    bcast_trees: int = 4096
    drop_reasons: int = wire.DROP_REASON_COUNT
    counter_columns: int = 16
    agg_window: int = wire.AGG_WINDOW  # aggregation slots per communicator
    agg_lanes: int = wire.AGG_LANES  # 32-bit lanes per REDUCE/RESULT packet
    ack_slots: int = 4096  # ACK-merge slots (and ack_merge entries)
    ack_window: int = 8  # checkpoint cells per ACK-merge slot

    @property
    def agg_slots(self) -> int:
        return self.comm_slots * self.agg_window

    @property
    def agg_payload_bytes(self) -> int:
        """The exact payload_len of every REDUCE/RESULT this program accepts."""
        return 4 * self.agg_lanes

    def check_port(self, port: int, where: str) -> None:
        if not 1 <= port < self.max_ports:
            raise CapacityError(
                f"{where}: port {port} is outside 1..{self.max_ports - 1}, the ports this "
                "program's child bitmaps can name"
            )


class CapacityError(ValueError):
    """The desired state does not fit the compiled program (too many entries, slots, ports)."""


def port_bit(port: int) -> int:
    """The data plane's child bit of a port: bit (port - 1)."""
    if not 1 <= port <= 32:
        raise ValueError(f"port {port} has no child bit (ports 1..32)")
    return 1 << (port - 1)


def ports_bitmap(ports: tuple[int, ...] | list[int] | frozenset[int]) -> int:
    bitmap = 0
    for port in ports:
        bitmap |= port_bit(port)
    return bitmap


def bitmap_ports(bitmap: int) -> tuple[int, ...]:
    return tuple(i + 1 for i in range(32) if bitmap >> i & 1)


@dataclass(frozen=True, slots=True, order=True)
class TreeKey:
    comm_id: int
    root_node: int
    tree: int


@dataclass(frozen=True, slots=True)
class StaticTree:
    """P4Runtime path: parent port and a per-tree multicast group in the table entry."""

    parent_port: int
    group: int


@dataclass(frozen=True, slots=True)
class SlotTree:
    """Mini-packet path: the binding names a membership slot; its content comes by MP."""

    slot: int


@dataclass(frozen=True, slots=True)
class TreeSlot:
    parent_port: int
    children: int  # child-port bitmap


@dataclass(frozen=True, slots=True)
class BarrierSlot:
    parent_port: int  # 0 at the root switch of the barrier tree
    child_mask: int  # bitmap of ports that send ARRIVE here (hosts and child switches)
    base_epoch: int = 0  # released epoch the slot starts from


@dataclass(frozen=True, slots=True)
class AckMerge:
    """Where this switch merges the switch-merged ACKs of one tree (p4src/common/ackmerge.p4):
    its cells' slot, the port towards the root, the ports ACKs come from, and a configuration
    generation (8 bits) that changes whenever this slot gets other content, so cells left by the
    old content never count for the new."""

    slot: int
    parent_port: int
    child_mask: int
    generation: int


@dataclass(frozen=True, slots=True)
class Replication:
    mode: ReplicationMode
    group: int  # subset mode: group id of bitmap 0 (so group = base + bitmap); else the group


@dataclass(slots=True)
class SwitchState:
    """Everything one switch should hold. Tables and groups go by P4Runtime, slots by MP."""

    switch: int  # switch index in the topology
    node_id: int
    ports: dict[int, tuple[PortRole, int]] = field(default_factory=dict)  # port -> (role, node)
    routes: dict[int, int] = field(default_factory=dict)  # node id -> egress port
    trees: dict[TreeKey, StaticTree | SlotTree] = field(default_factory=dict)
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict)  # group id -> ports
    replication: Replication | None = None
    tree_slots: dict[int, TreeSlot] = field(default_factory=dict)
    barrier_slots: dict[int, BarrierSlot] = field(default_factory=dict)  # comm id -> slot
    ack_merges: dict[TreeKey, AckMerge] = field(default_factory=dict)  # table ack_merge

    def check_capacity(self, sizes: Sizes) -> None:
        """Raise :class:`CapacityError` saying what overflows, before anything is pushed."""
        where = f"switch {self.switch}"
        limits = (
            ("unicast routes", len(self.routes), sizes.node_routes),
            ("broadcast tree bindings", len(self.trees), sizes.bcast_trees),
            ("ACK-merge entries", len(self.ack_merges), sizes.ack_slots),
            ("port entries", len(self.ports), sizes.max_ports),
        )
        for what, used, limit in limits:
            if used > limit:
                raise CapacityError(
                    f"{where}: {used} {what} exceed the program's {limit}; rebuild with a "
                    "larger size (see make build P4_DEFINES=...)"
                )
        for port in self.ports:
            sizes.check_port(port, where)
        for slot in self.tree_slots:
            if not 0 <= slot < sizes.tree_slots:
                raise CapacityError(f"{where}: tree slot {slot} >= {sizes.tree_slots} slots")
        for binding in self.trees.values():
            if isinstance(binding, SlotTree) and not 0 <= binding.slot < sizes.tree_slots:
                raise CapacityError(
                    f"{where}: tree slot {binding.slot} >= {sizes.tree_slots} slots"
                )
        for merge in self.ack_merges.values():
            if not 0 <= merge.slot < sizes.ack_slots:
                raise CapacityError(f"{where}: ACK-merge slot {merge.slot} >= {sizes.ack_slots}")
        for comm in self.barrier_slots:
            if not 0 <= comm < sizes.comm_slots:
                raise CapacityError(
                    f"{where}: communicator {comm} has no barrier slot "
                    f"(the program has {sizes.comm_slots})"
                )
