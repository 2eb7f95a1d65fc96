"""Checking BfRt entries against a compiled program's ``bfrt.json``, and pushing them to a switch
through ``bfrt_grpc`` (its client is passed in: nothing here imports it). The entries themselves
come from :mod:`controller.tofino.bfrt`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from controller.tofino.bfrt import ALL_PIPES, BfrtEntry, Value

# -- checking against the compiler's bfrt.json ------------------------------------------------


def check_against_bfrt_json(entries: Iterable[BfrtEntry], bfrt: Mapping[str, Any]) -> list[str]:
    """Problems with the names the entries use, as the compiled program's bfrt.json sees them
    (fixed tables such as $pre.* and $PORT belong to the driver, not to bfrt.json)."""
    tables = {t["name"]: t for t in bfrt.get("tables", [])}
    problems: list[str] = []
    for entry in entries:
        if entry.table.startswith("$"):
            continue
        spec = tables.get(entry.table)
        if spec is None:
            problems.append(f"no table {entry.table}")
            continue
        keys = {k["name"] for k in spec.get("key", [])}
        problems += [f"{entry.table}: no key field {k}" for k in entry.key if k not in keys]
        if entry.action is not None:
            actions = {a["name"]: a for a in spec.get("action_specs", [])}
            if entry.action not in actions:
                problems.append(f"{entry.table}: no action {entry.action}")
                continue
            fields = {d["name"] for d in actions[entry.action].get("data", [])}
        else:  # a fixed-data table (register, port metadata): data fields are singletons
            fields = {d.get("singleton", d).get("name") for d in spec.get("data", [])}
        problems += [f"{entry.table}: no data field {d}" for d in entry.data if d not in fields]
    return sorted(set(problems))


# -- writing with bfrt_grpc -------------------------------------------------------------------


class GrpcTable(Protocol):
    """The part of bfrt_grpc.client's table object that push() uses."""

    def make_key(self, key_field_list: list[Any]) -> Any: ...
    def make_data(self, data_field_list_in: list[Any], action_name: str | None = None) -> Any: ...
    def entry_add(self, target: Any, key_list: list[Any], data_list: list[Any]) -> Any: ...
    def entry_mod(self, target: Any, key_list: list[Any], data_list: list[Any]) -> Any: ...
    def default_entry_set(self, target: Any, data: Any) -> Any: ...


class GrpcInfo(Protocol):
    def table_get(self, name: str) -> GrpcTable: ...


def _data_tuple(gc: Any, name: str, value: Value) -> Any:
    if isinstance(value, bool):
        return gc.DataTuple(name, bool_val=value)
    if isinstance(value, str):
        return gc.DataTuple(name, str_val=value)
    if isinstance(value, tuple):
        if value and all(isinstance(v, bool) for v in value):
            return gc.DataTuple(name, bool_arr_val=list(value))
        return gc.DataTuple(name, int_arr_val=list(value))
    return gc.DataTuple(name, value)


def push(entries: Sequence[BfrtEntry], bfrt_info: GrpcInfo, gc: Any, device_id: int = 0) -> int:
    """Write ``entries`` in order through bfrt_grpc (``gc`` is ``bfrt_grpc.client``,
    ``bfrt_info`` what ``ClientInterface.bfrt_info_get()`` returned). Returns the number
    written; a failing write raises bfrt_grpc's error with the entry that caused it."""
    for entry in entries:
        grpc_table = bfrt_info.table_get(entry.table)
        target = gc.Target(
            device_id=device_id, pipe_id=ALL_PIPES if entry.pipe is None else entry.pipe
        )
        data = grpc_table.make_data(
            [_data_tuple(gc, name, value) for name, value in entry.data.items()], entry.action
        )
        if entry.operation == "set_default":
            grpc_table.default_entry_set(target, data)
            continue
        key = grpc_table.make_key([gc.KeyTuple(name, value) for name, value in entry.key.items()])
        if entry.operation == "mod":
            grpc_table.entry_mod(target, [key], [data])
        else:
            grpc_table.entry_add(target, [key], [data])
    return len(entries)
