"""What happens to each frame on an emulated link: the fault models of the link emulator.

One :class:`LinkFaults` per link direction decides every frame's fate from a random generator
seeded with (seed, link, direction), so the same frames meet the same faults on every run:

* independent loss, duplication, reordering (a frame held back so later ones overtake it) and
  added delay, each with its own probability;
* bursty loss, the Gilbert-Elliott model: the link is in a good or a bad state, moves from good
  to bad with probability ``burst_enter`` and back with ``burst_exit`` at each frame, and loses
  a frame with probability ``loss`` in the good state and ``burst_loss`` in the bad one. An
  emulated link is idle between a protocol's frames, so a burst counted in frames alone would
  swallow a retransmission seconds later as surely as the next frame; with ``burst_tick`` the
  chain also takes one step per that many seconds between frames, as if a busy fabric's other
  traffic passed, so a burst of a few frames lasts a few ticks on an idle link (0: frames only,
  netem's model);
* a link flap: ``down_after`` seconds after the setting is applied the link goes down for
  ``down_for`` seconds (every frame lost), then comes back; with ``down_every`` it goes down
  again at that period.

No sockets here: the emulator (linkemu.py) asks :meth:`LinkFaults.fate` per frame, and the
unit tests check the statistics and the timing directly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


def _check_probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} = {value}: a probability lies in [0, 1]")


@dataclass(frozen=True, slots=True)
class Impairment:
    loss: float = 0.0  # probability a frame is lost (in the good state, with bursts)
    duplicate: float = 0.0  # probability a frame is sent twice
    reorder: float = 0.0  # probability a frame is held back so later ones overtake it
    reorder_delay: float = 0.005  # how long a reordered frame is held, at most, seconds
    delay: float = 0.0  # added to every frame, seconds
    burst_enter: float = 0.0  # Gilbert-Elliott: probability per frame of good -> bad
    burst_exit: float = 0.0  # probability per frame of bad -> good (1 / mean burst length)
    burst_loss: float = 1.0  # probability a frame is lost in the bad state
    burst_tick: float = 0.0  # the chain also steps once per this many idle seconds; 0: never
    down_after: float = 0.0  # link flap: seconds from the setting until the link goes down
    down_for: float = 0.0  # seconds the link stays down; 0: it never goes down
    down_every: float = 0.0  # the flap repeats with this period, seconds; 0: once
    # the link's rate, Mb/s: each frame is serialised (its length at this rate) before its
    # delay, one after another per direction, as on a wire; 0: no serialisation here
    rate_mbit: float = 0.0

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder", "burst_enter", "burst_exit", "burst_loss"):
            _check_probability(name, getattr(self, name))
        for name in (
            "reorder_delay",
            "delay",
            "burst_tick",
            "down_after",
            "down_for",
            "down_every",
            "rate_mbit",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} = {getattr(self, name)}: must not be negative")
        if self.burst_enter and not self.burst_exit:
            raise ValueError("burst_enter without burst_exit: the bad state would never end")
        if self.down_every and self.down_every <= self.down_for:
            raise ValueError(
                f"down_every {self.down_every} s must exceed down_for {self.down_for} s"
            )

    def active(self) -> bool:
        return any(
            (
                self.loss,
                self.duplicate,
                self.reorder,
                self.delay,
                self.rate_mbit,
                self.bursty(),
                self.flaps(),
            )
        )

    def bursty(self) -> bool:
        return self.burst_enter > 0

    def flaps(self) -> bool:
        return self.down_for > 0

    def mean_loss(self) -> float:
        """The long-run fraction of frames lost by the random models (flaps aside)."""
        if not self.bursty():
            return self.loss
        bad = self.burst_enter / (self.burst_enter + self.burst_exit)
        return (1 - bad) * self.loss + bad * self.burst_loss

    def describe(self) -> str:
        parts = []
        if self.bursty():
            parts.append(
                f"bursty loss {self.mean_loss():.1%} on average (bursts of "
                f"{1 / self.burst_exit:.0f} frames on average losing {self.burst_loss:.0%}, "
                f"{self.loss:.0%} between"
                + (f"; one step per {self.burst_tick * 1e3:g} ms idle" if self.burst_tick else "")
                + ")"
            )
        elif self.loss or not self.flaps():
            parts.append(f"loss {self.loss:.0%}")
        if self.duplicate:
            parts.append(f"duplicate {self.duplicate:.0%}")
        if self.reorder:
            parts.append(f"reorder {self.reorder:.0%}")
        if self.delay:
            parts.append(f"delay {self.delay * 1e3:.1f} ms")
        if self.flaps():
            every = f", every {self.down_every:g} s" if self.down_every else ""
            parts.append(f"down {self.down_for:g} s from {self.down_after:g} s{every}")
        return ", ".join(parts)


class LinkFaults:
    """The faults of one direction of one link, and its counters."""

    __slots__ = (
        "bad",
        "down_lost",
        "duplicated",
        "forwarded",
        "impairment",
        "last",
        "lost",
        "overflow",
        "reordered",
        "rng",
        "since",
    )

    def __init__(self, seed: str, impairment: Impairment | None = None, now: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.impairment = impairment or Impairment()
        self.since = now  # when the impairment was applied: the flap schedule starts here
        self.bad = False  # Gilbert-Elliott state
        self.last = now  # when the previous frame came: idle ticks count from there
        self.forwarded = 0
        self.lost = 0  # every frame the link did not deliver, whatever the cause
        self.down_lost = 0  # of those, lost while the link was down
        self.overflow = 0  # of those, lost because the far end's queue was full
        self.duplicated = 0
        self.reordered = 0

    def apply(self, impairment: Impairment, now: float) -> None:
        """A new setting from ``now`` on; the generator keeps its position (reproducible
        for a given sequence of settings), the Gilbert-Elliott state starts good."""
        self.impairment = impairment
        self.since = now
        self.last = now
        self.bad = False

    def is_down(self, now: float) -> bool:
        impairment = self.impairment
        if not impairment.down_for:
            return False
        elapsed = now - self.since - impairment.down_after
        if elapsed < 0:
            return False
        if impairment.down_every:
            elapsed %= impairment.down_every
        return elapsed < impairment.down_for

    def _bad_chance(self, now: float) -> float:
        """The chance the chain is in the bad state at this frame: one step, plus one per
        ``burst_tick`` idle seconds since the previous frame (closed form of n steps)."""
        impairment = self.impairment
        enter, leave = impairment.burst_enter, impairment.burst_exit
        steps = 1
        if impairment.burst_tick:
            steps += int(max(0.0, now - self.last) / impairment.burst_tick)
        self.last = now
        stationary = enter / (enter + leave)
        memory = (1.0 - enter - leave) ** steps
        if self.bad:
            return stationary + (1.0 - stationary) * memory
        return stationary * (1.0 - memory)

    def fate(self, now: float) -> tuple[float, ...]:
        """The delay of each copy of a frame arriving at ``now``: () when it is lost,
        (0.0,) when it goes straight through. Draws from the generator in a fixed order, so
        a setting without bursts and flaps meets the same decisions as it always did."""
        impairment = self.impairment
        if impairment.down_for and self.is_down(now):
            self.lost += 1
            self.down_lost += 1
            return ()
        rng = self.rng
        loss = impairment.loss
        if impairment.burst_enter:
            self.bad = rng.random() < self._bad_chance(now)
            if self.bad:
                loss = impairment.burst_loss
        if loss and rng.random() < loss:
            self.lost += 1
            return ()
        copies = 1
        if impairment.duplicate and rng.random() < impairment.duplicate:
            copies = 2
            self.duplicated += 1
        delays = []
        for _ in range(copies):
            delay = impairment.delay
            if impairment.reorder and rng.random() < impairment.reorder:
                delay += rng.uniform(0.2, 1.0) * impairment.reorder_delay
                self.reordered += 1
            delays.append(delay)
        return tuple(delays)
