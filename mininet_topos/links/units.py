"""Link parameters in Mininet's units: rates in Mb/s (TCLink's ``bw``), delays as strings
such as ``"2ms"`` or ``"150us"`` (TCLink's ``delay``), queues in packets. Every value is
range-checked here, so a bad option fails at the command line with the reason."""

from __future__ import annotations

import re

RATE_MIN_MBIT = 0.01  # 10 kb/s: below it one jumbo frame takes more than 7 s
RATE_MAX_MBIT = 10_000.0  # what HTB shapes reliably on a veth; faster is "unshaped"
DELAY_MAX_S = 10.0
QUEUE_MIN = 1
QUEUE_MAX = 100_000

_DELAY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|ms|us|ns)?\s*$")
_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


class LinkParameterError(ValueError):
    """A rate, delay or queue outside what a link can be given."""


def check_rate(mbit: float, name: str = "rate") -> float:
    """A link rate in Mb/s, within [RATE_MIN_MBIT, RATE_MAX_MBIT]."""
    if not RATE_MIN_MBIT <= mbit <= RATE_MAX_MBIT:
        raise LinkParameterError(
            f"{name} {mbit:g} Mb/s is out of range: give {RATE_MIN_MBIT:g} to "
            f"{RATE_MAX_MBIT:g} Mb/s, or leave it out for unshaped links"
        )
    return float(mbit)


def parse_rate(text: str | float, name: str = "rate") -> float:
    """``"10"`` or ``10.0`` -> 10.0 Mb/s (Mininet's ``bw``: a number of Mb/s)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise LinkParameterError(
            f"{name} {text!r} is not a number of Mb/s (Mininet's bw, e.g. 10 or 0.5)"
        ) from None
    return check_rate(value, name)


def parse_delay(text: str | float, name: str = "delay") -> float:
    """``"2ms"``, ``"150us"``, ``"0.5s"`` or a bare number of seconds -> seconds."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        match = _DELAY.match(text)
        if match is None:
            raise LinkParameterError(
                f"{name} {text!r} is not a delay: write it as Mininet does, e.g. 2ms, 150us, 1s"
            )
        seconds = float(match.group(1)) * _SCALE[match.group(2) or "s"]
    if not 0.0 <= seconds <= DELAY_MAX_S:
        raise LinkParameterError(
            f"{name} {format_delay(seconds)} is out of range: give 0 to {DELAY_MAX_S:g}s"
        )
    return seconds


def check_queue(packets: int, name: str = "queue") -> int:
    """A per-port queue in packets, within [QUEUE_MIN, QUEUE_MAX]."""
    if not QUEUE_MIN <= packets <= QUEUE_MAX:
        raise LinkParameterError(
            f"{name} {packets} packets is out of range: give {QUEUE_MIN} to {QUEUE_MAX}"
        )
    return int(packets)


def parse_queue(text: str | int, name: str = "queue") -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise LinkParameterError(f"{name} {text!r} is not a whole number of packets") from None
    return check_queue(value, name)


def format_delay(seconds: float) -> str:
    """Seconds in the unit that reads best: 100ns, 2.5us, 2ms, 1.5s."""
    if seconds == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g}{unit}"
    return f"{seconds / 1e-9:.4g}ns"


def format_rate(mbit: float | None) -> str:
    """Mb/s in the unit that reads best: 512kb/s, 10Mb/s, 45.1Gb/s; None is unshaped."""
    if mbit is None:
        return "unshaped"
    if mbit >= 1000:
        return f"{mbit / 1000:.4g}Gb/s"
    if mbit >= 1:
        return f"{mbit:.4g}Mb/s"
    return f"{mbit * 1000:.4g}kb/s"
