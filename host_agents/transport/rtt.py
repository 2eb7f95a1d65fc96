"""Round-trip time estimate and retransmission timeout towards one destination (RFC 6298)."""

from __future__ import annotations

from dataclasses import dataclass

from host_agents.transport.config import EngineConfig


@dataclass(slots=True)
class RttEstimate:
    rto: float
    srtt: float = 0.0
    rttvar: float = 0.0
    cap: float | None = None  # the RTO's ceiling; None: the config's rto_max

    def sample(self, rtt: float, cfg: EngineConfig) -> None:
        """One unambiguous measurement: of a segment sent once (Karn's rule), or timed from
        the echoed send stamp of the copy that was answered (transport/stamps.py)."""
        if self.srtt == 0.0:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        cap = cfg.rto_max if self.cap is None else self.cap
        self.rto = min(cap, max(cfg.rto_min, self.srtt + 4 * self.rttvar))

    def timeout_for(self, cfg: EngineConfig, payload: int) -> float:
        """The RTO for a flow of frames carrying ``payload`` bytes each. On shaped links the
        configured floor and first guess are stretched by a full frame's hop; small frames
        cross in their own time (EngineConfig.frame_scale), so theirs shrink back, while what
        the samples say (queueing included) stands. A 1 KiB scatter at 1% loss on 10 Mb/s
        links waited a 0.36 s floor for round trips of tens of milliseconds."""
        scale = cfg.frame_scale(payload)
        if scale >= 1.0:
            return self.rto
        if self.srtt == 0.0:
            return self.rto * scale
        return min(self.rto, max(cfg.rto_min * scale, self.srtt + 4 * self.rttvar))
