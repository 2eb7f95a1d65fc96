"""How much slower than the emulator's own pace a shaped network is: the factor the agents'
protocol timers are stretched by, so a timer means the same number of frame times on any link.

The agents' timers (ACK and NACK delays, the first and smallest retransmission timeout, the
silence after which a receiver asks for a message's tail, the failure detector) were set on
unshaped links, where a hop costs about a millisecond of CPU. On a link of rate r a frame
alone takes (MTU + header) x 8 / r to cross, and a link may add a delay besides: a receiver
that asks for a repair after 10 ms of silence asks for every frame of a 2 Mb/s link, 36 ms
apart. The factor is the longer of one frame's transmission at the slowest link and the
longest link delay, in units of that millisecond, and never below 1 (unshaped: the defaults).

The timers of barriers and reductions wait for small frames (an ARRIVE, a RELEASE, a REDUCE of
at most 32 lanes), not full ones, and stretch by the control scale: the same rule for a
control frame. Stretched by a jumbo frame's time they made every in-network barrier that lost
one frame at 10 Mb/s wait out a 0.36-0.72 s resend timer for a round trip of 40 ms (30
barriers on Df(2,4,2) at 1% loss: 533 ms each; mean 44 ms without loss).
"""

from __future__ import annotations

from controller import wire
from controller.lanes import AGG_LANES
from mininet_topos.links.shaping import ETHERNET_HEADER, GLOBAL, LinkModel, transmission_time

REFERENCE_HOP_S = 1e-3  # what a hop costs on unshaped links, where the timers were set
# the largest frame a barrier or a reduction sends: a REDUCE or RESULT of the default lanes
CONTROL_FRAME_BYTES = ETHERNET_HEADER + wire.HEADER_LEN + 4 * AGG_LANES


def _scale_for(links: LinkModel, frame_bytes: int) -> float:
    hop = 0.0
    for kind in ("local", GLOBAL):
        rate = links.rate_of(kind)
        if rate is not None:
            hop = max(hop, transmission_time(frame_bytes, rate))
        hop = max(hop, links.delay_of(kind))
    return max(1.0, hop / REFERENCE_HOP_S)


def time_scale(links: LinkModel, mtu: int) -> float:
    """The factor (>= 1) by which ``links`` are slower per hop than the timers assume, for a
    full frame of ``mtu``."""
    return _scale_for(links, mtu + ETHERNET_HEADER)


def frame_scaling(links: LinkModel, mtu: int) -> dict[str, float]:
    """EngineConfig's byte_scale and delay_scale: what gives the data timers' factor for a
    frame of any size (nothing where the links stretch no timer)."""
    if time_scale(links, mtu) <= 1.0:
        return {}
    rates = [r for r in (links.rate_of("local"), links.rate_of(GLOBAL)) if r is not None]
    return {
        "byte_scale": transmission_time(1, min(rates)) / REFERENCE_HOP_S if rates else 0.0,
        "delay_scale": _scale_for(links, 0),  # a frame of no bytes: the link delay alone
    }


def control_time_scale(links: LinkModel) -> float:
    """The same factor for the barriers' and reductions' timers: a control frame's hop."""
    return _scale_for(links, CONTROL_FRAME_BYTES)
