"""The BfRt mapping of the desired switch state (controller/tofino/bfrt.py), checked for
content: multicast groups and nodes with their RID, the prune sets, port metadata, the same
table entries the P4Runtime driver writes on v1model, register cells, names that exist in the
P4 program, and (where a Tofino compiler is installed) the bfrt.json it generates."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from finsy import P4TableAction

from controller.desired_state import Communicator, Membership, desired_state
from controller.drivers import p4runtime
from controller.switch_state import PortRole, SwitchState, port_bit
from controller.tofino import bfrt, bfrt_grpc, build
from controller.tofino.bfrt import BfrtEntry, PortPlan, TofinoMappingError
from controller.topology_build import parse_spec
from tests import tna_compiles

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
P4SRC = REPO / "p4src"


@pytest.fixture(scope="module")
def states() -> dict[int, SwitchState]:
    topo = parse_spec("df:2,4,2")
    members = tuple(host.node_id for host in topo.hosts)
    comms = [
        Communicator(1, members, roots=members[:6]),
        Communicator(2, members[:12], membership=Membership.MINI_PACKETS),
    ]
    return desired_state(topo, comms, replication="all_ports")


@pytest.fixture(scope="module")
def state(states: dict[int, SwitchState]) -> SwitchState:
    """A switch with static trees, slot trees and barrier slots."""
    for candidate in states.values():
        if candidate.tree_slots and candidate.barrier_slots and candidate.groups:
            return candidate
    raise AssertionError("no switch holds every kind of state")


@pytest.fixture(scope="module")
def plan(state: SwitchState) -> PortPlan:
    """Ports 1-4 in pipe 0 (the state pipe), the rest in pipe 1."""
    return PortPlan({p: p if p <= 4 else 128 + p for p in state.ports})


@pytest.fixture(scope="module")
def entries(state: SwitchState, plan: PortPlan) -> list[BfrtEntry]:
    return bfrt.switch_entries(state, plan, registers=True, generation=7)


def by_table(entries: list[BfrtEntry], name: str) -> list[BfrtEntry]:
    return [e for e in entries if e.table == name]


def test_every_group_is_one_node_with_the_replica_rid(
    state: SwitchState, plan: PortPlan, entries: list[BfrtEntry]
) -> None:
    nodes = {e.key["$MULTICAST_NODE_ID"]: e.data for e in by_table(entries, bfrt.PRE_NODE)}
    groups = {e.key["$MGID"]: e.data for e in by_table(entries, bfrt.PRE_MGID)}
    expected = {g: ports for g, ports in state.groups.items() if ports}
    assert set(nodes) == set(groups) == set(expected)
    for group, ports in expected.items():
        assert nodes[group] == {
            "$MULTICAST_RID": bfrt.NETCOLL_REPLICA_RID,
            "$MULTICAST_LAG_ID": (),
            "$DEV_PORT": tuple(plan.dev_ports[p] for p in ports),
        }
        assert groups[group] == {
            "$MULTICAST_NODE_ID": (group,),
            "$MULTICAST_NODE_L1_XID_VALID": (False,),
            "$MULTICAST_NODE_L1_XID": (0,),
        }
    assert state.replication is not None and state.replication.group in nodes
    # nodes are written before the groups that name them
    tables = [e.table for e in entries]
    assert max(i for i, t in enumerate(tables) if t == bfrt.PRE_NODE) < tables.index(bfrt.PRE_MGID)


def test_prune_sets_exclude_the_ingress_port(plan: PortPlan, entries: list[BfrtEntry]) -> None:
    prune = {
        e.key["$MULTICAST_L2_XID"]: e.data["$DEV_PORT"] for e in by_table(entries, "$pre.prune")
    }
    assert prune == {logical: (dev,) for logical, dev in plan.dev_ports.items()}
    assert 0 not in prune  # bfrt.L2_XID_NONE of the P4 program: prunes nothing


def test_port_metadata_gives_logical_port_bit_and_state_pipe(
    plan: PortPlan, entries: list[BfrtEntry]
) -> None:
    rows = {
        e.key["ig_intr_md.ingress_port"]: e.data
        for e in by_table(entries, bfrt.table(bfrt.PORT_METADATA))
    }
    for logical, dev in plan.dev_ports.items():
        in_state_pipe = dev < 128
        assert rows[dev] == {
            "logical_port": logical,
            "flags": bfrt.PORT_FLAG_STATE_PIPE if in_state_pipe else 0,
            "steer_port": 68,
            "port_bit": 1 << (logical - 1),
        }
    assert rows[68] == {
        "logical_port": 0,
        "flags": bfrt.PORT_FLAG_STATE_PIPE | bfrt.PORT_FLAG_STEER_ENTRY,
        "steer_port": 68,
        "port_bit": 0,
    }
    enabled = {e.key["$DEV_PORT"] for e in by_table(entries, bfrt.PORT)}
    assert enabled == set(plan.dev_ports.values())  # not the internal recirculation port


def test_tables_hold_what_p4runtime_writes_on_v1model(
    state: SwitchState, entries: list[BfrtEntry]
) -> None:
    """The shared tables get the same keys, actions and parameters on both architectures."""
    bfrt_rows = {
        (
            e.table.rsplit(".", 1)[1],
            tuple(sorted(e.key.items())),
            e.action.rsplit(".", 1)[1],
        ): e.data
        for e in entries
        if e.action is not None
    }
    p4rt = p4runtime.table_entries(state) + p4runtime.default_entries(state)
    assert p4rt
    for entry in p4rt:
        match = tuple(sorted(dict(entry.match or {}).items()))
        assert isinstance(entry.action, P4TableAction)
        key = (entry.table_id, match, entry.action.name)
        assert bfrt_rows.get(key) == dict(entry.action.args), key


def test_release_pass_steers_to_the_state_pipe(plan: PortPlan, entries: list[BfrtEntry]) -> None:
    (steer,) = by_table(entries, bfrt.table(bfrt.STATE_PIPE_STEER_PORT))
    assert steer.operation == "set_default"
    assert steer.data == {"dev_port": plan.steer_port}


def test_shim_port_maps(plan: PortPlan, entries: list[BfrtEntry]) -> None:
    dev_map = {e.key["port"]: e.data for e in by_table(entries, bfrt.table(bfrt.DEV_PORT_MAP))}
    assert dev_map == {p: {"dev_port": d} for p, d in plan.dev_ports.items()}
    egress = {
        e.key["dev_port"]: e.data for e in by_table(entries, bfrt.table(bfrt.EGRESS_PORT_MAP))
    }
    assert egress == {d: {"port": p, "port_bit": port_bit(p)} for p, d in plan.dev_ports.items()}


def test_register_cells_are_written_in_every_pipe(
    state: SwitchState, entries: list[BfrtEntry]
) -> None:
    cells = {
        (e.table.rsplit(".", 1)[1], e.key["$REGISTER_INDEX"]): (e.data, e.pipe, e.operation)
        for e in entries
        if "$REGISTER_INDEX" in e.key
    }
    for comm, slot in state.barrier_slots.items():
        for name, value in (
            ("barrier_child_mask", slot.child_mask),
            ("barrier_parent", slot.parent_port),
            ("barrier_generation", 7),
            ("barrier_released", slot.base_epoch),
        ):
            data, pipe, operation = cells[(name, comm)]
            assert data == {f"{bfrt.BARRIER_STATE}.{name}.f1": value}
            assert pipe is None and operation == "mod"
    for index, tree_slot in state.tree_slots.items():
        assert cells[("tree_children", index)][0] == {
            f"{bfrt.TREE_STATE}.tree_children.f1": tree_slot.children
        }
    assert len(cells) == 4 * len(state.barrier_slots) + 3 * len(state.tree_slots)


def test_without_registers_slots_go_by_mini_packet(state: SwitchState, plan: PortPlan) -> None:
    entries = bfrt.switch_entries(state, plan)
    assert not [e for e in entries if "$REGISTER_INDEX" in e.key]


def test_entries_serialise_to_json(entries: list[BfrtEntry]) -> None:
    decoded = json.loads(json.dumps([e.to_json() for e in entries]))
    assert decoded[0]["table"] == bfrt.PORT and decoded[0]["pipe"] == "all"


# -- what the mapping refuses -----------------------------------------------------------------


def test_subset_replication_is_refused(plan: PortPlan) -> None:
    topo = parse_spec("single:3")
    state = desired_state(topo, [Communicator(1, (1, 2, 3))], replication="subset")[0]
    with pytest.raises(TofinoMappingError, match="all_ports"):
        bfrt.switch_entries(state, PortPlan({p: p for p in state.ports}))


def test_unmapped_and_bad_ports_are_refused(state: SwitchState, plan: PortPlan) -> None:
    missing = dict(plan.dev_ports)
    missing.pop(max(missing))
    with pytest.raises(TofinoMappingError, match="no dev port"):
        bfrt.switch_entries(state, PortPlan(missing))
    shared = dict(plan.dev_ports)
    shared[1] = shared[2]
    with pytest.raises(TofinoMappingError, match="share a dev port"):
        bfrt.switch_entries(state, PortPlan(shared))
    with pytest.raises(TofinoMappingError, match="not in the state pipe"):
        bfrt.switch_entries(state, PortPlan(plan.dev_ports, recirculation_ports={0: 196}))
    with pytest.raises(TofinoMappingError, match="recirculation port"):
        bfrt.switch_entries(state, PortPlan(plan.dev_ports, state_pipe=2, recirculation_ports={}))
    with pytest.raises(TofinoMappingError, match=r"0\.\.511"):
        bfrt.switch_entries(state, PortPlan({**plan.dev_ports, 1: 600}))


def test_roles_survive_the_mapping(state: SwitchState, entries: list[BfrtEntry]) -> None:
    roles = {e.key["port"]: e.data["role"] for e in by_table(entries, bfrt.table(bfrt.PORT_INFO))}
    assert roles == {p: int(role) for p, (role, _) in state.ports.items()}
    assert int(PortRole.HOST) in roles.values() and int(PortRole.SWITCH) in roles.values()


# -- in step with the P4 program --------------------------------------------------------------


def p4_constant(name: str) -> int:
    text = (P4SRC / "tna" / "headers.p4").read_text()
    found = re.search(rf"const bit<\d+> {name} = (0x[0-9a-fA-F]+|\d+);", text)
    assert found, f"{name} is not a constant of p4src/tna/headers.p4"
    return int(found.group(1), 0)


def test_constants_match_the_p4_program() -> None:
    assert p4_constant("NETCOLL_REPLICA_RID") == bfrt.NETCOLL_REPLICA_RID
    assert p4_constant("PORT_FLAG_STATE_PIPE") == bfrt.PORT_FLAG_STATE_PIPE
    assert p4_constant("PORT_FLAG_STEER_ENTRY") == bfrt.PORT_FLAG_STEER_ENTRY
    assert p4_constant("L2_XID_NONE") == 0


def _p4_source() -> str:
    return "\n".join(
        p.read_text() for p in sorted([*P4SRC.glob("common/*.p4"), *P4SRC.glob("tna/*.p4")])
    )


def _declared(kind: str, name: str, source: str) -> bool:
    patterns = {
        "table": rf"\btable {name}\b",
        "action": rf"\baction {name}\(",
        "register": rf"Register<[^;]*>\([^;]*\) {name};",
        "instance": rf"\b\w+\(\) {name};",
        "control": rf"\b(control|parser) {name}\(",
    }
    return re.search(patterns[kind], source) is not None


def _names(entries: list[BfrtEntry]) -> Iterator[tuple[str, str]]:
    """(kind, identifier) of every P4 object path component the entries name."""
    for entry in entries:
        if entry.table.startswith("$"):
            continue
        path = entry.table.removeprefix(f"{bfrt.PIPELINE}.").split(".")
        yield "control", path[0]
        for instance in path[1:-1]:
            yield "instance", instance
        last = path[-1]
        if last == "$PORT_METADATA":
            continue
        yield ("register" if "$REGISTER_INDEX" in entry.key else "table"), last
        if entry.action is not None:
            yield "action", entry.action.rsplit(".", 1)[1]


def test_names_exist_in_the_p4_program(entries: list[BfrtEntry]) -> None:
    source = _p4_source()
    missing = sorted({(k, n) for k, n in _names(entries) if not _declared(k, n, source)})
    assert not missing
    fields = set(re.findall(r"header netcoll_port_md_h \{(.*?)\}", source, re.DOTALL)[0].split())
    for e in by_table(entries, bfrt.table(bfrt.PORT_METADATA)):
        assert {f"{name};" for name in e.data} <= fields


# -- bfrt.json ----------------------------------------------------------------------------------


def synthetic_bfrt(entries: list[BfrtEntry]) -> dict[str, Any]:
    """The bfrt.json tables these entries imply, in bf-p4c's layout."""
    tables: dict[str, dict[str, Any]] = {}
    for e in entries:
        if e.table.startswith("$"):
            continue
        spec = tables.setdefault(
            e.table, {"name": e.table, "key": [], "action_specs": [], "data": []}
        )
        spec["key"] = [{"name": k} for k in e.key]
        if e.action is None:
            spec["data"] = [{"mandatory": False, "singleton": {"name": d}} for d in e.data]
        elif e.action not in {a["name"] for a in spec["action_specs"]}:
            spec["action_specs"].append({"name": e.action, "data": [{"name": d} for d in e.data]})
    return {"schema_version": "1.0.0", "tables": list(tables.values())}


def test_bfrt_json_check_finds_wrong_names(entries: list[BfrtEntry]) -> None:
    schema = synthetic_bfrt(entries)
    assert bfrt_grpc.check_against_bfrt_json(entries, schema) == []
    route = next(t for t in schema["tables"] if t["name"].endswith("node_route"))
    route["action_specs"][0]["data"] = [{"name": "egress_port"}]
    schema["tables"] = [t for t in schema["tables"] if not t["name"].endswith("egress_port_map")]
    problems = bfrt_grpc.check_against_bfrt_json(entries, schema)
    assert f"{bfrt.table(bfrt.NODE_ROUTE)}: no data field port" in problems
    assert f"no table {bfrt.table(bfrt.EGRESS_PORT_MAP)}" in problems


@pytest.mark.parametrize("target", build.TARGETS, ids=lambda t: t.name)
def test_entries_match_the_compiled_bfrt_json(
    entries: list[BfrtEntry], target: build.Target, tmp_path: Path
) -> None:
    """Every table, key, action and data field the mapping writes exists in the bfrt.json the
    Tofino compiler generates for the program (runs where the compiler is installed)."""
    schema = json.loads(tna_compiles.compiled_bfrt(target, tmp_path).read_text())
    assert bfrt_grpc.check_against_bfrt_json(entries, schema) == []


# -- writing with bfrt_grpc -------------------------------------------------------------------


class FakeGc:
    """The constructors of bfrt_grpc.client that push() uses, recording their arguments."""

    @staticmethod
    def Target(**kwargs: Any) -> tuple[str, dict[str, Any]]:  # bfrt_grpc's names
        return ("target", kwargs)

    @staticmethod
    def KeyTuple(name: str, value: int) -> tuple[str, int]:
        return (name, value)

    @staticmethod
    def DataTuple(name: str, val: Any = None, **kwargs: Any) -> tuple[str, Any]:
        return (name, kwargs if kwargs else val)


class FakeTable:
    def __init__(self, name: str, calls: list[tuple[Any, ...]]) -> None:
        self.name = name
        self.calls = calls

    def make_key(self, key_field_list: list[Any]) -> Any:
        return key_field_list

    def make_data(self, data_field_list_in: list[Any], action_name: str | None = None) -> Any:
        return (action_name, data_field_list_in)

    def entry_add(self, target: Any, key_list: list[Any], data_list: list[Any]) -> None:
        self.calls.append(("add", self.name, target, key_list, data_list))

    def entry_mod(self, target: Any, key_list: list[Any], data_list: list[Any]) -> None:
        self.calls.append(("mod", self.name, target, key_list, data_list))

    def default_entry_set(self, target: Any, data: Any) -> None:
        self.calls.append(("default", self.name, target, data))


class FakeInfo:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def table_get(self, name: str) -> FakeTable:
        return FakeTable(name, self.calls)


def test_push_writes_entries_in_order_through_bfrt_grpc(entries: list[BfrtEntry]) -> None:
    info = FakeInfo()
    assert bfrt_grpc.push(entries, info, FakeGc, device_id=3) == len(entries)
    assert [c[1] for c in info.calls] == [e.table for e in entries]
    node = next(c for c in info.calls if c[1] == bfrt.PRE_NODE)
    assert node[0] == "add" and node[2] == ("target", {"device_id": 3, "pipe_id": bfrt.ALL_PIPES})
    data = dict(node[4][0][1])
    assert data["$MULTICAST_RID"] == bfrt.NETCOLL_REPLICA_RID
    first_node_ports = by_table(entries, bfrt.PRE_NODE)[0].data["$DEV_PORT"]
    assert isinstance(first_node_ports, tuple)
    assert data["$DEV_PORT"] == {"int_arr_val": list(first_node_ports)}
    mgid = next(c for c in info.calls if c[1] == bfrt.PRE_MGID)
    assert dict(mgid[4][0][1])["$MULTICAST_NODE_L1_XID_VALID"] == {"bool_arr_val": [False]}
    route = next(c for c in info.calls if c[1] == bfrt.table(bfrt.NODE_ROUTE))
    assert route[4][0][0] == f"{bfrt.NETCOLL}.route.forward"
    defaults = [c for c in info.calls if c[0] == "default"]
    assert {c[1] for c in defaults} == {
        bfrt.table(bfrt.SWITCH_IDENTITY),
        bfrt.table(bfrt.MP_REPLICATION),
        bfrt.table(bfrt.STATE_PIPE_STEER_PORT),
    }
    assert {c[0] for c in info.calls if c[1].endswith(".barrier_released")} == {"mod"}
