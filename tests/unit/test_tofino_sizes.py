"""Capacities of a TNA build read from its bfrt.json (controller/tofino/sizes.py): a schema in
bf-p4c's layout, broken ones, and (where a Tofino compiler is installed) the bfrt.json of each
target's profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.switch_state import Sizes
from controller.tofino import build
from controller.tofino.sizes import BfrtSchemaError, load, program_from_bfrt_json
from tests import tna_compiles

pytestmark = pytest.mark.unit

ING = "pipe.TnaIngress"
STATE = f"{ING}.netcoll.barrier_state"


def schema(sizes: Sizes, reduction: bool = True, lanes: int | None = None) -> dict[str, Any]:
    """bfrt.json's objects for these sizes, named as bf-p4c names the program's."""

    def obj(name: str, kind: str, size: int) -> dict[str, Any]:
        return {"name": name, "id": len(tables) + 1, "table_type": kind, "size": size}

    tables: list[dict[str, Any]] = []
    tables += [
        obj(f"{ING}.netcoll.classify.port_info", "MatchAction_Direct", sizes.max_ports),
        obj(f"{ING}.netcoll.route.node_route", "MatchAction_Direct", sizes.node_routes),
        obj(f"{ING}.netcoll.broadcast_lookup.bcast_tree", "MatchAction_Direct", sizes.bcast_trees),
        obj(f"{ING}.netcoll.ack_merge_lookup.ack_merge", "MatchAction_Direct", sizes.ack_slots),
        obj(f"{STATE}.barrier_released", "Register", sizes.comm_slots),
        obj(f"{STATE}.barrier_cells", "Register", sizes.comm_slots * sizes.barrier_window),
        obj(f"{ING}.netcoll.tree_state.tree_generation", "Register", sizes.tree_slots),
        obj(f"{ING}.drop_reasons", "Counter", sizes.drop_reasons),
        obj("pipe.TnaEgress.egress_drop_reasons", "Counter", sizes.drop_reasons),
        obj(f"{ING}.rx_port_op", "Counter", sizes.max_ports * sizes.counter_columns),
        obj(f"{ING}.netcoll.ack_state.ack_cells", "Register", sizes.ack_slots * sizes.ack_window),
    ]
    if reduction:
        tables.append(obj(f"{STATE}.agg_state.agg_key", "Register", sizes.agg_slots))
        for lane in range(sizes.agg_lanes if lanes is None else lanes):
            tables.append(obj(f"{ING}.agg_lanes.agg_lane_{lane}", "Register", sizes.agg_slots))
    return {"schema_version": "1.0.0", "tables": tables}


def test_sizes_come_back_as_compiled() -> None:
    sizes = Sizes(comm_slots=128, barrier_window=8, agg_window=8, agg_lanes=16, ack_slots=1024)
    program = program_from_bfrt_json(schema(sizes))
    assert program.reduction
    assert program.sizes == sizes


def test_a_build_without_reduction_says_so() -> None:
    program = program_from_bfrt_json(schema(Sizes(), reduction=False))
    assert not program.reduction
    assert program.sizes.comm_slots == Sizes().comm_slots


@pytest.mark.parametrize("lanes", [0, 12])
def test_lane_counts_the_program_cannot_have_are_refused(lanes: int) -> None:
    with pytest.raises(BfrtSchemaError, match=r"agg_lane_0 \.\. agg_lane_<n-1>"):
        program_from_bfrt_json(schema(Sizes(agg_lanes=16), lanes=lanes))


def test_a_missing_lane_is_refused() -> None:
    bfrt = schema(Sizes(agg_lanes=8))
    bfrt["tables"] = [t for t in bfrt["tables"] if not t["name"].endswith(".agg_lane_3")]
    with pytest.raises(BfrtSchemaError, match="lane registers"):
        program_from_bfrt_json(bfrt)


def test_a_lane_of_another_size_is_refused() -> None:
    bfrt = schema(Sizes(agg_lanes=8))
    next(t for t in bfrt["tables"] if t["name"].endswith(".agg_lane_5"))["size"] = 7
    with pytest.raises(BfrtSchemaError, match="agg_lane_5 has 7 cells"):
        program_from_bfrt_json(bfrt)


def test_another_program_is_named_as_such() -> None:
    bfrt = schema(Sizes())
    bfrt["tables"] = [t for t in bfrt["tables"] if not t["name"].endswith("barrier_released")]
    with pytest.raises(BfrtSchemaError, match=r"one Register \*\.barrier_released, found none"):
        program_from_bfrt_json(bfrt)
    with pytest.raises(BfrtSchemaError, match="no list of tables"):
        program_from_bfrt_json({"schema_version": "1.0.0"})


def test_load_says_what_is_wrong_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(BfrtSchemaError, match="run make build-tna"):
        load(tmp_path / "bfrt.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(BfrtSchemaError, match="is not JSON"):
        load(tmp_path / "bad.json")
    (tmp_path / "ok.json").write_text(json.dumps(schema(Sizes())))
    assert load(tmp_path / "ok.json").sizes == Sizes()


def profile_value(target: build.Target, name: str, default: int) -> int:
    for define in target.defines:
        key, _, value = define.partition("=")
        if key == name:
            return int(value)
    return default


@pytest.mark.parametrize("target", build.TARGETS, ids=lambda t: t.name)
def test_compiled_bfrt_json_gives_the_profile(target: build.Target, tmp_path: Path) -> None:
    """What the compiler wrote for each target's profile is what the profile asks for: Tofino 1
    without reduction, Tofino 2 with its lanes and window, everything else the program's
    defaults (runs where a Tofino compiler is installed)."""
    program = load(tna_compiles.compiled_bfrt(target, tmp_path))
    reduction = "NETCOLL_NO_REDUCTION" not in target.defines
    assert program.reduction == reduction
    expected = Sizes()
    if reduction:
        expected = Sizes(
            agg_window=profile_value(target, "NETCOLL_AGG_WINDOW", Sizes().agg_window),
            agg_lanes=profile_value(target, "NETCOLL_AGG_LANES", Sizes().agg_lanes),
        )
    assert program.sizes == expected
