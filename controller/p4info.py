"""What the compiled program offers, read from its P4Info: names and capacities.

The control plane never hard-codes a size: :func:`sizes_from_p4info` reads the tables,
registers and counters the program was compiled with (``make build P4_DEFINES=-D...``), so
running out of room is a control-plane error naming the limit.
"""

from __future__ import annotations

from pathlib import Path

from finsy import P4Schema

from controller.switch_state import Sizes

# Aliases (shortest unique names) of the program's P4Runtime objects.
PORT_INFO = "port_info"
SWITCH_IDENTITY = "switch_identity"
NODE_ROUTE = "node_route"
BCAST_TREE = "bcast_tree"
ACK_MERGE = "ack_merge"
MP_REPLICATION = "mp_replication"
RX_COUNTER = "rx_port_op"
TX_COUNTER = "tx_port_op"
DROP_COUNTER = "drop_reasons"
EGRESS_DROP_COUNTER = "egress_drop_reasons"


class ProgramError(RuntimeError):
    """The P4Info does not describe a netcoll program this control plane can drive."""


def load_schema(p4info: Path, p4blob: Path | None = None) -> P4Schema:
    if not p4info.exists():
        raise ProgramError(f"{p4info} does not exist; run 'make build' first")
    return P4Schema(p4info, p4blob)


def _table_size(schema: P4Schema, name: str) -> int:
    try:
        return int(schema.tables[name].size)
    except (KeyError, ValueError) as exc:
        raise ProgramError(f"P4Info has no table {name!r}: not a netcoll program?") from exc


def _register_size(schema: P4Schema, suffix: str) -> int:
    for register in schema.registers:
        if register.name.endswith(suffix):
            return int(register.size)
    raise ProgramError(f"P4Info has no register *{suffix}: not a netcoll program?")


def sizes_from_p4info(schema: P4Schema) -> Sizes:
    comm_slots = _register_size(schema, "barrier_released")
    cells = _register_size(schema, "barrier_cells")
    try:
        drop_reasons = int(schema.counters[DROP_COUNTER].size)
        port_counters = int(schema.counters[RX_COUNTER].size)
    except KeyError as exc:
        raise ProgramError(f"P4Info lacks counter {exc}") from exc
    max_ports = _table_size(schema, PORT_INFO)
    agg_slots = _register_size(schema, "agg_key")
    agg_lane_cells = _register_size(schema, "agg_lanes")
    ack_slots = _table_size(schema, ACK_MERGE)
    return Sizes(
        max_ports=max_ports,
        comm_slots=comm_slots,
        barrier_window=cells // comm_slots,
        tree_slots=_register_size(schema, "tree_generation"),
        node_routes=_table_size(schema, NODE_ROUTE),
        bcast_trees=_table_size(schema, BCAST_TREE),
        drop_reasons=drop_reasons,
        counter_columns=port_counters // max_ports,
        agg_window=agg_slots // comm_slots,
        agg_lanes=agg_lane_cells // agg_slots,
        ack_slots=ack_slots,
        ack_window=_register_size(schema, "ack_cells") // ack_slots,
    )
