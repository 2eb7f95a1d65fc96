"""What a compiled TNA program offers, read from the bfrt.json its compiler wrote.

On BMv2 :func:`controller.p4info.sizes_from_p4info` reads the program's capacities from P4Info;
this is the same for a Tofino build, whose profile changes them: Tofino 1's default profile
has no in-network reduction, Tofino 2's fewer lanes per REDUCE than v1model
(``Target.defines`` in :mod:`controller.tofino.build`). Hosts must size their chunks by what
the switch was compiled with, and a control plane must not choose the in-network reduction
for a switch without one. bf-p4c sizes every table, register and counter in bfrt.json as the
program declares it (``initTableJson`` in its ``control-plane/bfruntime.cpp``), so the figures
are the program's, as in P4Info.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.switch_state import Sizes

# The lanes are registers agg_lane_0 .. agg_lane_<n-1> (tna/state.p4, TNA_AGG_LANE_REGISTER)
LANE_REGISTER = re.compile(r"\.agg_lane_(\d+)$")
LANE_COUNTS = (8, 16, 32, 64)  # what common/constants.p4 accepts for NETCOLL_AGG_LANES
REGISTER = "Register"
COUNTER = "Counter"


class BfrtSchemaError(ValueError):
    """bfrt.json does not describe a netcoll TNA program this control plane can drive."""


@dataclass(frozen=True, slots=True)
class TofinoProgram:
    """Capacities of a compiled TNA program. Without in-network reduction the switch drops
    REDUCE and RESULT, the hosts reduce among themselves, and ``sizes.agg_window`` and
    ``sizes.agg_lanes`` keep Sizes' defaults: nothing on the switch uses them."""

    sizes: Sizes
    reduction: bool


def _objects(bfrt: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tables = bfrt.get("tables")
    if not isinstance(tables, list):
        raise BfrtSchemaError("bfrt.json has no list of tables")
    return [t for t in tables if isinstance(t, Mapping) and isinstance(t.get("name"), str)]


def _named(objects: list[Mapping[str, Any]], name: str, kind: str | None) -> list[int]:
    sizes = []
    for obj in objects:
        if obj["name"].endswith(f".{name}") and (kind is None or obj.get("table_type") == kind):
            size = obj.get("size")
            if not isinstance(size, int) or size <= 0:
                raise BfrtSchemaError(f"{obj['name']} has no positive size in bfrt.json")
            sizes.append(size)
    return sizes


def _size(objects: list[Mapping[str, Any]], name: str, kind: str | None = None) -> int:
    """The size of the one object called ``name`` (the last part of its path)."""
    sizes = _named(objects, name, kind)
    if len(sizes) != 1:
        what = f"{kind} " if kind else ""
        found = "none" if not sizes else f"{len(sizes)} of them"
        raise BfrtSchemaError(
            f"bfrt.json should hold one {what}*.{name}, found {found}: not a netcoll TNA program?"
        )
    return sizes[0]


def _lanes(objects: list[Mapping[str, Any]], agg_slots: int) -> int:
    numbers = []
    for obj in objects:
        match = LANE_REGISTER.search(obj["name"])
        if match and obj.get("table_type") == REGISTER:
            numbers.append(int(match.group(1)))
            if obj.get("size") != agg_slots:
                raise BfrtSchemaError(
                    f"{obj['name']} has {obj.get('size')} cells, agg_key {agg_slots}"
                )
    count = len(numbers)
    if sorted(numbers) != list(range(count)) or count not in LANE_COUNTS:
        raise BfrtSchemaError(
            f"bfrt.json's lane registers are agg_lane_{sorted(numbers)}, not agg_lane_0 .. "
            f"agg_lane_<n-1> for n in {LANE_COUNTS}"
        )
    return count


def program_from_bfrt_json(bfrt: Mapping[str, Any]) -> TofinoProgram:
    objects = _objects(bfrt)
    comm_slots = _size(objects, "barrier_released", REGISTER)
    max_ports = _size(objects, "port_info")
    ack_slots = _size(objects, "ack_merge")
    reduction = bool(_named(objects, "agg_key", REGISTER))
    defaults = Sizes()
    agg_window, agg_lanes = defaults.agg_window, defaults.agg_lanes
    if reduction:
        agg_slots = _size(objects, "agg_key", REGISTER)
        if agg_slots % comm_slots:
            raise BfrtSchemaError(f"agg_key's {agg_slots} cells are not per communicator")
        agg_window = agg_slots // comm_slots
        agg_lanes = _lanes(objects, agg_slots)
    sizes = Sizes(
        max_ports=max_ports,
        comm_slots=comm_slots,
        barrier_window=_size(objects, "barrier_cells", REGISTER) // comm_slots,
        tree_slots=_size(objects, "tree_generation", REGISTER),
        node_routes=_size(objects, "node_route"),
        bcast_trees=_size(objects, "bcast_tree"),
        # ingress's; egress_drop_reasons has as many cells
        drop_reasons=_size(objects, "drop_reasons", COUNTER),
        counter_columns=_size(objects, "rx_port_op", COUNTER) // max_ports,
        agg_window=agg_window,
        agg_lanes=agg_lanes,
        ack_slots=ack_slots,
        ack_window=_size(objects, "ack_cells", REGISTER) // ack_slots,
    )
    return TofinoProgram(sizes, reduction)


def load(path: Path) -> TofinoProgram:
    """The capacities of the program whose bfrt.json is at ``path``."""
    try:
        bfrt = json.loads(path.read_text())
    except OSError as exc:
        raise BfrtSchemaError(f"cannot read {path}: {exc.strerror}; run make build-tna") from exc
    except ValueError as exc:
        raise BfrtSchemaError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(bfrt, Mapping):
        raise BfrtSchemaError(f"{path} is not a bfrt.json object")
    return program_from_bfrt_json(bfrt)
