"""Typed names of what the transport keeps state for.

Frozen dataclasses rather than tuples: a :class:`UnicastKey` never equals a :class:`McastKey`
with the same numbers, so both kinds of message can share one table of messages being received.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from controller import wire


@dataclass(frozen=True, slots=True)
class UnicastKey:
    """One unicast message; ``peer`` is the other end (receiver when sending, sender when
    receiving)."""

    peer: int
    comm: int
    epoch: int
    tag: int


@dataclass(frozen=True, slots=True)
class McastKey:
    """One multicast: its root, communicator, epoch and switch tree."""

    root: int
    comm: int
    epoch: int
    tree: int

    @classmethod
    def of(cls, hdr: wire.Header) -> McastKey:
        return cls(hdr.root_node, hdr.comm_id, hdr.epoch, hdr.tree)

    def feedback(self, op: int, src: int, dst: int, **fields: int) -> wire.Header:
        """An ACK or NACK about this multicast, from ``src`` to ``dst``."""
        return wire.Header(
            op=op,
            comm_id=self.comm,
            epoch=self.epoch,
            tree=self.tree,
            root_node=self.root,
            src_node=src,
            dst_node=dst,
            **fields,
        )


MessageKey: TypeAlias = UnicastKey | McastKey  # a message being received
