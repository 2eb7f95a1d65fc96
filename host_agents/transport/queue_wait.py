"""When a silence is a queue, not a loss.

On a network that is the bottleneck (shaped links, or every rank rooting at once) a frame can
wait behind hundreds of others in the switches' queues; a timer set from an idle round trip
fires while it is still on its way, and the repair it sends joins the same queues. With every
rank of Df(2,4,2) broadcasting 16 KiB under switch-merged ACKs at once, the roots' timeouts
(0.2 s, doubling) and the receivers' stalled-tail NACKs (10 ms) sent 864 whole-tree resends and
16,000 NACKs, and no merged ACK reached any root in 19 s; with those two timers held off, the
same operation completed in 2.5 s with 2 resends (measured).

A host sees the queue two ways. On its own link: while frames keep arriving, the network is
still delivering, so a silence only counts as a loss once the host's link has gone quiet too,
or once it has lasted ``limit`` whatever the link does (a loss amid steady traffic is still
repaired, later). And in the roots' send stamps: a frame whose one-way delay exceeds the least
seen from its root waited that much in queues (clocks need not agree, only differences count;
LEDBAT's measure, RFC 6817), so waits are lengthened by the queueing lately seen
(``queue_delay.QueueDelay``): with every link at 10 Mb/s the bottleneck is often a global
link, and a host's own link falls quiet while its frames still wait there. On an idle
network nothing changes: a lost segment of the only flow leaves the link quiet, and no queue
was seen.
"""

from __future__ import annotations

from host_agents.transport.endpoint import Endpoint


def link_busy(endpoint: Endpoint, now: float, window: float) -> bool:
    """Has this host received any frame within ``window`` seconds of ``now``?"""
    return now - endpoint.last_heard < window


def queue_allowance(endpoint: Endpoint, now: float) -> float:
    """What a wait for a frame adds for the queues lately seen: twice their delay (a frame
    behind the one that came may meet as much again of others' traffic interleaved)."""
    return 2 * endpoint.queue_delay.current(now)


def silence_is_loss(
    endpoint: Endpoint, now: float, silent: float, quiet: float, limit: float
) -> bool:
    """A flow silent for ``silent`` seconds: lost after ``quiet`` if the host's link went
    quiet as well (nothing heard for ``quiet``), after ``limit`` in any case."""
    if silent < quiet:
        return False
    return silent >= limit or not link_busy(endpoint, now, quiet)
