"""Round-trip time estimate and retransmission timeout towards one destination (RFC 6298).

The backoff belongs to the destination, not to one message: Karn's rule keeps retransmitted
segments out of the estimate, so when a loaded network answers slower than the timeout only
the backed-off timeout can carry that knowledge to the next messages; it stays until a segment
sent once is acknowledged (RFC 6298, 5.5-5.7). Restarting each message at the unlearned
timeout sent every one of many short messages twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from host_agents.transport.config import EngineConfig


@dataclass(slots=True)
class RttEstimate:
    rto: float
    srtt: float = 0.0
    rttvar: float = 0.0
    backoff: float = 1.0  # doubled by each round of timeouts, reset by a clean sample

    def sample(self, rtt: float, cfg: EngineConfig) -> None:
        """One clean measurement (never of a retransmitted segment: Karn's rule)."""
        if self.srtt == 0.0:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.rto = min(cfg.rto_max, max(cfg.rto_min, self.srtt + 4 * self.rttvar))
        self.backoff = 1.0

    def timeout(self, rto_max: float) -> float:
        """The retransmission timeout now, backoff included."""
        return min(self.rto * self.backoff, rto_max)

    def back_off(self, armed_with: float, rto_max: float) -> None:
        """A timeout whose timer was set at backoff ``armed_with`` expired: double the backoff,
        once for all the timers set at the same backoff that expire together."""
        if armed_with >= self.backoff:
            self.backoff = min(self.backoff * 2, rto_max / max(self.rto, 1e-6))
