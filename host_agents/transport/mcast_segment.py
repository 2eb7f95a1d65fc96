"""One segment of a multicast on the wire: down its tree, or as a unicast repair."""

from __future__ import annotations

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.digests import NO_DIGEST, digest_of
from host_agents.transport.endpoint import BROADCAST_MAC, Endpoint
from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Source, segment_bounds, segment_count
from host_agents.transport.stamps import NO_STAMP, send_stamp


def send_mcast_segment(
    endpoint: Endpoint,
    key: McastKey,
    source: Source,
    seg: int,
    flags: int,
    repair_to: int | None = None,
) -> int:
    """One segment of the multicast ``key``: along the tree, or (a repair) by unicast, from
    its root or from a co-root holding a copy (``src_node`` says which). Its send stamp."""
    segment_size = endpoint.cfg.segment_size
    start, end = segment_bounds(source.size, seg, segment_size)
    seg_count = segment_count(source.size, segment_size)
    if seg == seg_count - 1:
        flags |= Flag.LAST
    hdr = wire.Header(
        op=Op.MCAST if repair_to is None else Op.UNICAST,
        comm_id=key.comm,
        epoch=key.epoch,
        tree=key.tree,
        flags=flags,
        src_node=endpoint.node,
        dst_node=repair_to or 0,
        root_node=key.root,
        seg_idx=seg,
        seg_count=seg_count,
        msg_len=source.size,
        # the root's send time, for receivers to echo (host_agents.transport.stamps)
        stamp=(
            send_stamp(endpoint.loop.time(), endpoint.cfg.stamp_unit)
            if endpoint.node == key.root
            else NO_STAMP
        ),
        # the root's digest of the content, once complete (host_agents.transport.digests)
        seq=content_digest(source) if endpoint.node == key.root else NO_DIGEST,
    )
    dst_mac = BROADCAST_MAC if repair_to is None else endpoint.directory.mac(repair_to)
    endpoint.send_frame(dst_mac, hdr, source.view[start:end])
    endpoint.stats.data_sent += 1
    return hdr.stamp


def content_digest(source: Source) -> int:
    """The digest of ``source``, computed once when it is complete; NO_DIGEST before."""
    if not source.digest and source.available >= source.size:
        source.digest = digest_of(source.view[: source.size])
    return source.digest
