"""Losses that concurrent multicasts show a co-root (RACK's rule, RFC 8985, across messages).

Every root of one operation (the packed allgather's leaders, every rank rooting a broadcast)
multicasts through the same co-root of each other group, which holds each copy and hears each
member's ACKs. A member that acknowledged all of a multicast this co-root completed later, but
not one it completed earlier, lost the earlier one: copies that went the same way at about
the same time do not overtake one another by more than a reordering. The co-root repairs it at
once instead of after its probe delay, which on the loaded emulator is about a second (four
times the members' usual lag) and doubles when the repair is lost too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from host_agents.transport.keys import McastKey


class Progress(Protocol):
    """What a co-root knows of one multicast it aggregates."""

    cum: dict[int, int]  # member -> segments it acknowledged
    complete_at: float | None  # when the co-root's own copy completed
    seg_count: int  # the multicast's segments (known once the copy completed)
    outrun: set[int]  # members already repaired by this rule


def outran(
    aggregated: Mapping[McastKey, Progress], later: McastKey, member: int, reorder: float
) -> list[McastKey]:
    """The multicasts of ``later``'s operation (its communicator and epoch) that this co-root
    completed more than ``reorder`` seconds before ``later``, which ``member`` has just
    completed, and that ``member`` still lacks (each named once per member)."""
    completed = aggregated[later].complete_at
    if completed is None:
        return []
    lost: list[McastKey] = []
    for key, progress in aggregated.items():
        if key.comm != later.comm or key.epoch != later.epoch or key == later:
            continue
        if progress.complete_at is None or progress.complete_at + reorder >= completed:
            continue
        if progress.cum.get(member, progress.seg_count) >= progress.seg_count:
            continue
        if member not in progress.outrun:
            lost.append(key)
    return lost
