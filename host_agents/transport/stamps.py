"""Send stamps: a multicast root's send time on its data frames, echoed in merged ACKs.

Karn's rule takes no round-trip sample from a segment sent more than once, because its ACK
cannot say which copy it answers. A switch-merged root whose multicasts all time out once (a
loaded host, or a first RTO below the real round trip: every rank rooting at once) then never
learns its round trip, and times out on every multicast, each time down the whole tree. The
echo says which copy: a receiver's merged ACK carries the stamp of the data frame that made it
ACK (RFC 7323's timestamps, folded into the header's 16-bit ``stamp`` field), so the root
measures from that copy's send time whichever transmission it was.
"""

from __future__ import annotations

from controller import wire

STAMP_UNIT = 1e-4  # seconds per tick: 16 bits span 6.5 s, past rto_max and any sane round trip
STAMP_SPAN = 0x10000 * STAMP_UNIT
NO_STAMP = 0  # not stamped (frames from anyone but the root), or nothing to echo


def _ticks(now: float, unit: float) -> int:
    return int(now / unit) & 0xFFFF


def send_stamp(now: float, unit: float = STAMP_UNIT) -> int:
    """The stamp of a frame sent at loop time ``now`` (never :data:`NO_STAMP`), in ticks of
    ``unit`` seconds (the root's choice: receivers only echo it)."""
    return _ticks(now, unit) or 1


def echo_of(data: wire.Header) -> int:
    """What an ACK prompted by ``data`` echoes: its stamp when its multicast's root sent it
    (a co-root's repair carries none of the root's clock)."""
    return data.stamp if data.src_node == data.root_node else NO_STAMP


def echoed_round_trip(
    now: float, echo: int, since: float, unit: float = STAMP_UNIT
) -> float | None:
    """The round trip an ACK echoing ``echo`` measures, for a multicast begun at ``since``;
    None when there is no echo, or it cannot be one of that multicast's stamps (older than
    the multicast, or the multicast older than the stamps' span, where they wrap)."""
    if echo == NO_STAMP or now - since >= 0x10000 * unit:
        return None
    age = ((_ticks(now, unit) - echo) & 0xFFFF) * unit
    return age if age <= now - since + unit else None
