"""The argument types of ``make bench``'s command line: loss settings, engine settings and
ACK-merge modes, each checked where it is parsed."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from host_agents.comm import ACK_MERGE_MODES
from host_agents.engine import EngineConfig
from mininet_topos.links.linkfaults import Impairment


def parse_loss(text: str) -> Impairment:
    """``LOSS[,DUPLICATE[,REORDER]]``, each a fraction (0.01) or a percentage (1%)."""
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = float(item[:-1]) / 100 if item.endswith("%") else float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected LOSS[,DUPLICATE[,REORDER]] as fractions or percentages"
            ) from None
        values.append(value)
    if len(values) > 3:
        raise argparse.ArgumentTypeError(f"{text!r}: at most loss, duplicate and reorder")
    try:
        return Impairment(*values)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def engine_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of an EngineConfig field, the value in the field's type."""
    key, sep, value = text.partition("=")
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    if not sep or key not in fields:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(fields))}"
        )
    kind = type(getattr(EngineConfig(), key))
    if kind is bool:  # bool("false") is True: spell the two values out
        if value.lower() not in ("true", "false", "1", "0"):
            raise argparse.ArgumentTypeError(f"{key}: {value!r} is not true or false")
        return key, value.lower() in ("true", "1")
    try:
        return key, kind(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{key}: {value!r} is not of type {kind.__name__}"
        ) from exc


def ack_merge_modes(text: str) -> str:
    unknown = [m for m in text.split(",") if m not in ACK_MERGE_MODES]
    if unknown or not text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a comma-separated list of {', '.join(ACK_MERGE_MODES)}"
        )
    return text
