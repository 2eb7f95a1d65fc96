"""How much slower than the emulator's own pace a shaped network is: the factor the agents'
protocol timers are stretched by, so a timer means the same number of frame times on any link.

The agents' timers (ACK and NACK delays, the first and smallest retransmission timeout, the
silence after which a receiver asks for a message's tail, the failure detector) were set on
unshaped links, where a hop costs about a millisecond of CPU. On a link of rate r a frame
alone takes (MTU + header) x 8 / r to cross, and a link may add a delay besides: a receiver
that asks for a repair after 10 ms of silence asks for every frame of a 2 Mb/s link, 36 ms
apart. The factor is the longer of one frame's transmission at the slowest link and the
longest link delay, in units of that millisecond, and never below 1 (unshaped: the defaults).
"""

from __future__ import annotations

from mininet_topos.links.shaping import ETHERNET_HEADER, GLOBAL, LinkModel, transmission_time

REFERENCE_HOP_S = 1e-3  # what a hop costs on unshaped links, where the timers were set


def time_scale(links: LinkModel, mtu: int) -> float:
    """The factor (>= 1) by which ``links`` are slower per hop than the timers assume."""
    hop = 0.0
    for kind in ("local", GLOBAL):
        rate = links.rate_of(kind)
        if rate is not None:
            hop = max(hop, transmission_time(mtu + ETHERNET_HEADER, rate))
        hop = max(hop, links.delay_of(kind))
    return max(1.0, hop / REFERENCE_HOP_S)
