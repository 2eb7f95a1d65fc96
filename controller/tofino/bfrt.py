"""The desired state of one switch, translated for a Tofino running p4src/tna (BfRt).

:class:`~controller.switch_state.SwitchState` is what the controller computes for every switch;
:func:`switch_entries` turns it into the BfRt entries a Tofino needs, in the order to write them,
and :func:`controller.tofino.bfrt_grpc.push` writes them with Intel's ``bfrt_grpc`` client. Nothing
here talks to a switch by itself, so the mapping is unit-tested for content (and checked against the
compiler's bfrt.json by :func:`controller.tofino.bfrt_grpc.check_against_bfrt_json` where the Tofino
backend ran).

What maps to what (docs/porting-to-tofino.md has the full table):

* multicast group g with ports P -> ``$pre.node`` g {RID, dev ports of P} and ``$pre.mgid`` g
  {node g, no level-1 exclusion}; one level-1 node per group, whose RID is the one every
  multicast packet carries, so level-2 pruning applies;
* logical port p -> ``$PORT`` (speed, FEC, enable), the parser's ``$PORT_METADATA`` {p, flags,
  steer port, one-hot bit}, ``$pre.prune`` p {dev port of p} (the packet's level-2 exclusion id
  is its logical ingress port), ``dev_port_map`` p and ``egress_port_map`` dev(p);
* tables (port roles, routes, tree bindings, ACK-merge entries, identity, replication) -> the
  same tables (the ACK-merge cells start zeroed and are the data plane's own);
* barrier and tree slots -> register cells, written in every pipe with one symmetric write
  (only the state pipe's copies are ever used: the data plane steers every packet that touches
  them there) and read back from the state pipe.

Logical ports are SwitchState's port numbers (1..31, the child-bitmap positions); dev ports
are the chip's. A :class:`PortPlan` says which is which.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.switch_state import (
    ReplicationMode,
    Sizes,
    SlotTree,
    StaticTree,
    SwitchState,
    port_bit,
)

# -- constants shared with the P4 program (tests/unit/test_tofino_mapping.py checks them) ----

NETCOLL_REPLICA_RID = 1  # p4src/tna/headers.p4: the RID of every node and multicast packet
PORT_FLAG_STATE_PIPE = 0x01
PORT_FLAG_STEER_ENTRY = 0x02

# -- Tofino facts ---------------------------------------------------------------------------

DEV_PORT_LIMIT = 512  # 9-bit dev ports: pipe in bits 8:7, port in bits 6:0
# $pre.prune holds 288 level-2 exclusion ids on Tofino 1; ours are the logical ports (< 32).
MGID_LIMIT = 1 << 16
ALL_PIPES = 0xFFFF  # bfrt_grpc's pipe id for a symmetric write
# Each pipe's internal recirculation port on Tofino 1 (68 + 128 * pipe). Tofino 2 and
# front-panel ports in loopback differ: pass PortPlan.recirculation_ports.
TOFINO1_RECIRCULATION_PORTS: Mapping[int, int] = {0: 68, 1: 196, 2: 324, 3: 452}


def pipe_of(dev_port: int) -> int:
    """DEVPORT_PIPE: the pipe a dev port belongs to."""
    return dev_port >> 7


# -- BfRt names of the program's objects ------------------------------------------------------
# bf-p4c names a table "<pipeline>.<control>.<instance path>.<name>" and an action or a
# register data field the same without the pipeline; check_against_bfrt_json() verifies them.

PIPELINE = "pipe"
INGRESS = "TnaIngress"
NETCOLL = f"{INGRESS}.netcoll"
EGRESS = "TnaEgress"
INGRESS_PARSER = "TnaIngressParser"

PORT_INFO = f"{NETCOLL}.classify.port_info"
SWITCH_IDENTITY = f"{NETCOLL}.classify.switch_identity"
NODE_ROUTE = f"{NETCOLL}.route.node_route"
BCAST_TREE = f"{NETCOLL}.broadcast_lookup.bcast_tree"
ACK_MERGE = f"{NETCOLL}.ack_merge_lookup.ack_merge"
MP_REPLICATION = f"{NETCOLL}.child_replication.mp_replication"
DEV_PORT_MAP = f"{INGRESS}.dev_port_map"
STATE_PIPE_STEER_PORT = f"{INGRESS}.state_pipe_steer_port"
EGRESS_PORT_MAP = f"{EGRESS}.egress_port_map"
PORT_METADATA = f"{INGRESS_PARSER}.$PORT_METADATA"
TREE_STATE = f"{NETCOLL}.tree_state"
BARRIER_STATE = f"{NETCOLL}.barrier_state"

# Fixed (non-P4) tables of the driver
PRE_NODE = "$pre.node"
PRE_MGID = "$pre.mgid"
PRE_PRUNE = "$pre.prune"
PORT = "$PORT"


def table(path: str) -> str:
    """The BfRt table name of a P4 object path (fixed tables start with '$' and stay as is)."""
    return path if path.startswith("$") else f"{PIPELINE}.{path}"


def action(control_path: str, name: str) -> str:
    return f"{control_path.rsplit('.', 1)[0]}.{name}"


def register_field(register_path: str, part: str = "f1") -> str:
    """Data field of a register cell: "<path>.f1" for a scalar, "<path>.<field>" for a struct."""
    return f"{register_path}.{part}"


# -- entries ----------------------------------------------------------------------------------

Value = int | bool | str | tuple[int, ...] | tuple[bool, ...]
Operation = Literal["add", "mod", "set_default"]


@dataclass(frozen=True, slots=True)
class BfrtEntry:
    """One BfRt write: ``table`` with exact-match ``key`` (empty for a default entry) and
    ``data``, for ``action`` when the table is a P4 match-action table."""

    table: str
    key: dict[str, int] = field(default_factory=dict)
    data: dict[str, Value] = field(default_factory=dict)
    action: str | None = None
    operation: Operation = "add"
    pipe: int | None = None  # None: every pipe (a symmetric write)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table": self.table, "operation": self.operation}
        if self.key:
            out["key"] = dict(self.key)
        if self.action is not None:
            out["action"] = self.action
        out["data"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.data.items()}
        out["pipe"] = "all" if self.pipe is None else self.pipe
        return out


class TofinoMappingError(ValueError):
    """The desired state cannot be expressed on Tofino with this port plan."""


@dataclass(frozen=True, slots=True)
class PortPlan:
    """Where the switch's logical ports are on the chip, and which pipe holds the state.

    ``dev_ports`` maps every logical port of the SwitchState to its dev port (from the port
    setup of the box, e.g. ``bf_pltfm`` front-panel numbering). ``state_pipe`` is the pipe whose
    registers hold the collective state; packets that touch state and enter in another pipe
    are steered to ``recirculation_ports[state_pipe]``."""

    dev_ports: Mapping[int, int]
    state_pipe: int = 0
    recirculation_ports: Mapping[int, int] = field(
        default_factory=lambda: dict(TOFINO1_RECIRCULATION_PORTS)
    )
    speed: str = "BF_SPEED_100G"
    fec: str = "BF_FEC_TYP_NONE"

    @property
    def steer_port(self) -> int:
        """The dev port that recirculates into the state pipe."""
        try:
            return self.recirculation_ports[self.state_pipe]
        except KeyError:
            raise TofinoMappingError(
                f"no recirculation port given for the state pipe {self.state_pipe}"
            ) from None

    def dev(self, logical: int) -> int:
        try:
            return self.dev_ports[logical]
        except KeyError:
            raise TofinoMappingError(
                f"logical port {logical} has no dev port in the port plan"
            ) from None


def check_mappable(state: SwitchState, plan: PortPlan, sizes: Sizes) -> None:
    """Raise TofinoMappingError naming what cannot be mapped, before any entry is made."""
    where = f"switch {state.switch}"
    state.check_capacity(sizes)
    if state.replication is None or state.replication.mode != ReplicationMode.ALL_PORTS:
        raise TofinoMappingError(
            f"{where}: Tofino replicates child bitmaps through one all-ports group filtered in "
            "egress; the subset-group layout (one group per port subset) does not scale to "
            "Tofino port counts. Compute the state with desired_state(..., "
            "replication='all_ports')"
        )
    for logical, dev in plan.dev_ports.items():
        sizes.check_port(logical, where)
        if not 0 <= dev < DEV_PORT_LIMIT:
            raise TofinoMappingError(f"{where}: dev port {dev} of port {logical} is not 0..511")
    devs = list(plan.dev_ports.values())
    if len(set(devs)) != len(devs):
        raise TofinoMappingError(f"{where}: two logical ports share a dev port")
    steer = plan.steer_port
    if pipe_of(steer) != plan.state_pipe:
        raise TofinoMappingError(
            f"{where}: recirculation port {steer} is not in the state pipe {plan.state_pipe}"
        )
    if steer in devs:
        raise TofinoMappingError(f"{where}: recirculation port {steer} is also a logical port")
    used = set(state.ports) | set(state.routes.values())
    for ports in state.groups.values():
        used.update(ports)
    for binding in state.trees.values():
        if isinstance(binding, StaticTree) and binding.parent_port:
            used.add(binding.parent_port)
    for merge in state.ack_merges.values():
        used.add(merge.parent_port)
    for logical in sorted(used):
        plan.dev(logical)
    for group in state.groups:
        if not 0 < group < MGID_LIMIT:
            raise TofinoMappingError(f"{where}: multicast group {group} is not 1..65535")


def pre_entries(state: SwitchState, plan: PortPlan) -> list[BfrtEntry]:
    """Multicast: one level-1 node per group (node id = group id), then the groups, then the
    level-2 prune sets that keep a replica from leaving by its ingress port."""
    nodes: list[BfrtEntry] = []
    groups: list[BfrtEntry] = []
    for group, ports in sorted(state.groups.items()):
        if not ports:
            continue  # a leaf's empty group: the data plane never selects it
        nodes.append(
            BfrtEntry(
                PRE_NODE,
                key={"$MULTICAST_NODE_ID": group},
                data={
                    "$MULTICAST_RID": NETCOLL_REPLICA_RID,
                    "$MULTICAST_LAG_ID": (),
                    "$DEV_PORT": tuple(plan.dev(p) for p in ports),
                },
            )
        )
        groups.append(
            BfrtEntry(
                PRE_MGID,
                key={"$MGID": group},
                data={
                    "$MULTICAST_NODE_ID": (group,),
                    "$MULTICAST_NODE_L1_XID_VALID": (False,),
                    "$MULTICAST_NODE_L1_XID": (0,),
                },
            )
        )
    prune = [
        BfrtEntry(PRE_PRUNE, key={"$MULTICAST_L2_XID": logical}, data={"$DEV_PORT": (dev,)})
        for logical, dev in sorted(plan.dev_ports.items())
    ]
    return nodes + groups + prune


def port_entries(plan: PortPlan) -> list[BfrtEntry]:
    """Front-panel ports, and the parser's per-port metadata (phase 0)."""
    entries = [
        BfrtEntry(
            PORT,
            key={"$DEV_PORT": dev},
            data={"$SPEED": plan.speed, "$FEC": plan.fec, "$PORT_ENABLE": True},
        )
        for _, dev in sorted(plan.dev_ports.items())
    ]
    for logical, dev in sorted(plan.dev_ports.items()):
        flags = PORT_FLAG_STATE_PIPE if pipe_of(dev) == plan.state_pipe else 0
        entries.append(
            BfrtEntry(
                table(PORT_METADATA),
                key={"ig_intr_md.ingress_port": dev},
                data={
                    "logical_port": logical,
                    "flags": flags,
                    "steer_port": plan.steer_port,
                    "port_bit": port_bit(logical),
                },
            )
        )
    # steered packets re-enter the state pipe here, led by the steer header
    entries.append(
        BfrtEntry(
            table(PORT_METADATA),
            key={"ig_intr_md.ingress_port": plan.steer_port},
            data={
                "logical_port": 0,
                "flags": PORT_FLAG_STATE_PIPE | PORT_FLAG_STEER_ENTRY,
                "steer_port": plan.steer_port,
                "port_bit": 0,
            },
        )
    )
    return entries


def table_entries(state: SwitchState, plan: PortPlan) -> list[BfrtEntry]:
    """The P4 tables: the shared ones (as over P4Runtime on v1model) and the shim's port maps."""
    entries: list[BfrtEntry] = []
    for port, (role, node) in sorted(state.ports.items()):
        entries.append(
            BfrtEntry(
                table(PORT_INFO),
                key={"port": port},
                action=action(PORT_INFO, "set_port"),
                data={"role": int(role), "node": node},
            )
        )
    for node, port in sorted(state.routes.items()):
        entries.append(
            BfrtEntry(
                table(NODE_ROUTE),
                key={"node": node},
                action=action(NODE_ROUTE, "forward"),
                data={"port": port},
            )
        )
    for key, binding in sorted(state.trees.items()):
        match = {"comm_id": key.comm_id, "root_node": key.root_node, "tree": key.tree}
        if isinstance(binding, StaticTree):
            entries.append(
                BfrtEntry(
                    table(BCAST_TREE),
                    key=match,
                    action=action(BCAST_TREE, "replicate_static"),
                    data={"parent_port": binding.parent_port, "group": binding.group},
                )
            )
        else:
            assert isinstance(binding, SlotTree)
            entries.append(
                BfrtEntry(
                    table(BCAST_TREE),
                    key=match,
                    action=action(BCAST_TREE, "replicate_from_slot"),
                    data={"slot": binding.slot},
                )
            )
    for key, merge in sorted(state.ack_merges.items()):
        entries.append(
            BfrtEntry(
                table(ACK_MERGE),
                key={"comm_id": key.comm_id, "root_node": key.root_node, "tree": key.tree},
                action=action(ACK_MERGE, "merge_acks"),
                data={
                    "slot": merge.slot,
                    "parent_port": merge.parent_port,
                    "child_mask": merge.child_mask,
                    "generation": merge.generation,
                },
            )
        )
    for logical, dev in sorted(plan.dev_ports.items()):
        entries.append(
            BfrtEntry(
                table(DEV_PORT_MAP),
                key={"port": logical},
                action=action(DEV_PORT_MAP, "to_dev_port"),
                data={"dev_port": dev},
            )
        )
        entries.append(
            BfrtEntry(
                table(EGRESS_PORT_MAP),
                key={"dev_port": dev},
                action=action(EGRESS_PORT_MAP, "set_logical_port"),
                data={"port": logical, "port_bit": port_bit(logical)},
            )
        )
    entries.append(
        BfrtEntry(
            table(SWITCH_IDENTITY),
            action=action(SWITCH_IDENTITY, "set_identity"),
            data={"node": state.node_id},
            operation="set_default",
        )
    )
    # a reduction's release pass is steered from a pass that may have no port metadata
    entries.append(
        BfrtEntry(
            table(STATE_PIPE_STEER_PORT),
            action=action(STATE_PIPE_STEER_PORT, "steer_to"),
            data={"dev_port": plan.steer_port},
            operation="set_default",
        )
    )
    assert state.replication is not None  # check_mappable
    entries.append(
        BfrtEntry(
            table(MP_REPLICATION),
            action=action(MP_REPLICATION, "all_ports_group"),
            data={"group": state.replication.group},
            operation="set_default",
        )
    )
    return entries


def _register_write(register: str, index: int, value: int) -> BfrtEntry:
    return BfrtEntry(
        table(register),
        key={"$REGISTER_INDEX": index},
        data={register_field(register): value},
        operation="mod",
    )


def register_entries(state: SwitchState, generation: int = 1) -> list[BfrtEntry]:
    """Barrier and tree slots as register cells, written in every pipe (one symmetric write;
    only the state pipe's copy is used), instead of by mini packets.

    ``generation`` plays the role of an MP write's generation: it must be newer than the
    slot's current one, since it is part of every barrier cell's tag (older arrivals then no
    longer count) and later mini packets are compared with it."""
    if not 0 < generation < 1 << 32:
        raise TofinoMappingError(f"generation {generation} is not 1..2**32-1")
    entries: list[BfrtEntry] = []
    for comm, slot in sorted(state.barrier_slots.items()):
        entries += [
            _register_write(f"{BARRIER_STATE}.barrier_child_mask", comm, slot.child_mask),
            _register_write(f"{BARRIER_STATE}.barrier_parent", comm, slot.parent_port),
            _register_write(f"{BARRIER_STATE}.barrier_generation", comm, generation),
            _register_write(f"{BARRIER_STATE}.barrier_released", comm, slot.base_epoch),
        ]
    for index, tree_slot in sorted(state.tree_slots.items()):
        entries += [
            _register_write(f"{TREE_STATE}.tree_parent", index, tree_slot.parent_port),
            _register_write(f"{TREE_STATE}.tree_children", index, tree_slot.children),
            _register_write(f"{TREE_STATE}.tree_generation", index, generation),
        ]
    return entries


def switch_entries(
    state: SwitchState,
    plan: PortPlan,
    *,
    sizes: Sizes | None = None,
    registers: bool = False,
    generation: int = 1,
) -> list[BfrtEntry]:
    """Everything one switch needs, in write order (ports, multicast nodes before the groups
    that name them, tables, then register cells when ``registers``: otherwise barrier and tree
    slots go by mini packet as on v1model)."""
    check_mappable(state, plan, sizes or Sizes())
    entries = port_entries(plan) + pre_entries(state, plan) + table_entries(state, plan)
    if registers:
        entries += register_entries(state, generation)
    return entries


def resource_use(entries: Iterable[BfrtEntry]) -> Counter[str]:
    """Entries per table: the multicast and table budget one switch's state needs."""
    return Counter(entry.table for entry in entries if entry.operation != "set_default")
