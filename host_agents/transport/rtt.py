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
