"""A constant P4 table read from its source and applied as the target applies it: the entries of
``const entries = { ... }`` in order, the first whose every key field matches wins. Used by the
tests that check the TNA program's constant tables against the reference model."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

P4SRC = Path(__file__).resolve().parents[1] / "p4src"

# a token that is not a number or a constant of common/constants.p4 -> its value
Resolve = Callable[[str], int | None]


@dataclass(frozen=True)
class Entry:
    match: tuple[str, ...]
    action: str
    arguments: tuple[str, ...]


@functools.cache
def constant(name: str) -> int:
    """A constant of p4src/common/constants.p4."""
    text = (P4SRC / "common" / "constants.p4").read_text()
    found = re.search(rf"const bit<\d+> {name} = (0x[0-9a-fA-F]+|\d+);", text)
    assert found, f"{name} is not a constant of p4src/common/constants.p4"
    return int(found.group(1), 0)


@functools.cache
def entries(source: str, table: str, keys: int) -> tuple[Entry, ...]:
    """The const entries of ``table`` in ``p4src/<source>``, each with ``keys`` fields."""
    text = (P4SRC / source).read_text()
    body = text[text.index(f"table {table}") :]
    body = body[body.index("const entries = {") : body.index("const default_action")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    found = re.findall(r"\(([^()]*)\):\s*(\w+)\(([^()]*)\);", body, re.S)
    read = []
    for match, action, arguments in found:
        fields = tuple(" ".join(f.split()) for f in match.split(","))
        assert len(fields) == keys, fields
        values = tuple(a.strip() for a in arguments.split(",") if a.strip())
        read.append(Entry(fields, action, values))
    return tuple(read)


@functools.cache
def default_action(source: str, table: str) -> tuple[str, tuple[str, ...]]:
    """The const default action of ``table`` in ``p4src/<source>``: (action, arguments)."""
    text = (P4SRC / source).read_text()
    body = text[text.index(f"table {table}") :]
    found = re.search(r"const default_action = (\w+)\(([^()]*)\);", body)
    assert found, f"table {table} has no const default_action"
    return found.group(1), tuple(a.strip() for a in found.group(2).split(",") if a.strip())


def value(token: str, resolve: Resolve | None = None) -> int:
    if token == "true":
        return 1
    if token == "false":
        return 0
    if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", token):
        return int(token, 0)
    resolved = resolve(token) if resolve else None
    return constant(token) if resolved is None else resolved


def matches(field: str, actual: int, resolve: Resolve | None = None) -> bool:
    """Does one key field of an entry (``_``, a value, ``low .. high``, ``value &&& mask``)
    match the packet's value?"""
    if field == "_":
        return True
    if ".." in field:
        low, high = (value(t.strip(), resolve) for t in field.split(".."))
        return low <= actual <= high
    if "&&&" in field:
        want, mask = (value(t.strip(), resolve) for t in field.split("&&&"))
        return actual & mask == want & mask
    return actual == value(field, resolve)


def first_match(
    table: Sequence[Entry],
    key_names: Sequence[str],
    keys: Mapping[str, int],
    resolve: Resolve | None = None,
) -> Entry | None:
    """The entry the target applies, None for the default action."""
    for entry in table:
        if all(
            matches(field, keys[name], resolve)
            for field, name in zip(entry.match, key_names, strict=True)
        ):
            return entry
    return None


def applied(
    source: str,
    table: str,
    key_names: Sequence[str],
    keys: Mapping[str, int],
    resolve: Resolve | None = None,
) -> tuple[int, str, tuple[str, ...]]:
    """What ``table`` in ``p4src/<source>`` does with ``keys``: the entry taken (its index,
    -1 for the default action), the action and its arguments."""
    read = entries(source, table, len(key_names))
    entry = first_match(read, key_names, keys, resolve)
    if entry is None:
        return -1, *default_action(source, table)
    return read.index(entry), entry.action, entry.arguments
