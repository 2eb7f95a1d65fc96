"""What a NACK may cost whoever repairs it: never more than what the asker lacks.

A NACK names ranges; a root (or a co-root) repairs what they name. Unbounded, 62 bytes of NACK
made a root resend every segment from the first named to the newest sent (950 kB on links), and
a co-root naming three of its members counted as three askers and had the root multicast down
the whole tree (8 MB from 3 NACKs). The bounds, each applied before any segment is sent:

* a floor: segments the asker has acknowledged, or every ACK source has (the root's slowest),
  are not lacking, and are not resent;
* a cap: at most ``cap`` segments per NACK (the root's window bounds what anyone can lack);
* one asker per reporter: a co-root's NACKs on behalf of its members count as the co-root's
  own, so one host never makes up the askers of a whole-tree repair.

With the floor, the repairs a NACK brings one asker are at most the segments it lacks by its
own ACKs, each once per interval: at most 1x, so within the 2x the threat model allows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


def lacking(ranges: list[tuple[int, int]], *, floor: int, end: int, cap: int) -> Iterator[int]:
    """The segments of ``ranges`` at or above ``floor`` and below ``end``, at most ``cap``."""
    given = 0
    for first, count in ranges:
        for seg in range(max(first, floor), min(first + count, end)):
            if given >= cap:
                return
            given += 1
            yield seg


def asker_unit(requester: int, aggregates: Mapping[int, tuple[int, ...]], root: int) -> int:
    """Who counts as the asker of a NACK for ``requester``: the co-root that reports it (a
    co-root's NACKs on behalf of its members are its own), else the requester itself."""
    for coroot, members in aggregates.items():
        if coroot != root and requester in members:
            return coroot
    return requester
