"""The link emulator's fault models: seeded statistics of independent and bursty loss, the
timing of a link flap, and the emulator applying them to frames, all without root."""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Iterator

import pytest

from mininet_topos.links.linkemu import Direction, LinkEmulator
from mininet_topos.links.linkfaults import Impairment, LinkFaults

pytestmark = pytest.mark.unit

FRAMES = 200_000


def losses(faults: LinkFaults, frames: int = FRAMES) -> list[bool]:
    return [not faults.fate(0.0) for _ in range(frames)]


def burst_lengths(lost: list[bool]) -> list[int]:
    """Lengths of the runs of consecutive losses."""
    runs, current = [], 0
    for is_lost in lost:
        if is_lost:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs + ([current] if current else [])


def test_independent_loss_has_the_set_rate_and_no_bursts() -> None:
    lost = losses(LinkFaults("1:link:ab", Impairment(loss=0.05)))
    runs = burst_lengths(lost)
    assert sum(lost) / FRAMES == pytest.approx(0.05, rel=0.05)
    # geometric runs: mean 1 / (1 - 0.05)
    assert sum(runs) / len(runs) == pytest.approx(1 / 0.95, rel=0.05)


def test_gilbert_elliott_loss_comes_in_bursts_of_the_set_mean_length() -> None:
    bursty = Impairment(burst_enter=0.01, burst_exit=0.2, burst_loss=1.0)
    lost = losses(LinkFaults("1:link:ab", bursty))
    runs = burst_lengths(lost)
    assert bursty.mean_loss() == pytest.approx(0.01 / 0.21)
    assert sum(lost) / FRAMES == pytest.approx(bursty.mean_loss(), rel=0.1)
    assert sum(runs) / len(runs) == pytest.approx(1 / 0.2, rel=0.1)
    # the same average loss, independent, almost never loses 5 frames in a row
    independent = burst_lengths(losses(LinkFaults("1:link:ab", Impairment(loss=0.0476))))
    assert max(independent) < 6 < max(runs)


def test_gilbert_elliott_loses_in_both_states_at_their_rates() -> None:
    bursty = Impairment(loss=0.01, burst_enter=0.02, burst_exit=0.1, burst_loss=0.5)
    faults = LinkFaults("7:x:ba", bursty)
    good = bad = good_lost = bad_lost = 0
    for _ in range(FRAMES):
        lost = not faults.fate(0.0)
        if faults.bad:
            bad, bad_lost = bad + 1, bad_lost + lost
        else:
            good, good_lost = good + 1, good_lost + lost
    assert bad / FRAMES == pytest.approx(0.02 / 0.12, rel=0.1)
    assert bad_lost / bad == pytest.approx(0.5, rel=0.05)
    assert good_lost / good == pytest.approx(0.01, rel=0.15)
    assert (good_lost + bad_lost) / FRAMES == pytest.approx(bursty.mean_loss(), rel=0.1)


def test_decisions_are_reproducible_per_link_and_direction() -> None:
    setting = Impairment(loss=0.05, duplicate=0.02, reorder=0.05, burst_enter=0.01, burst_exit=0.3)
    runs: dict[str, list[list[tuple[float, ...]]]] = {}
    for seed in ("5:l1:ab", "5:l1:ab", "5:l1:ba", "6:l1:ab"):
        faults = LinkFaults(seed, setting)
        runs.setdefault(seed, []).append([faults.fate(0.0) for _ in range(5000)])
    assert runs["5:l1:ab"][0] == runs["5:l1:ab"][1]
    assert runs["5:l1:ab"][0] != runs["5:l1:ba"][0] != runs["6:l1:ab"][0]


def old_fates(seed: str, setting: Impairment, frames: int) -> list[tuple[float, ...]]:
    """The decisions of the emulator before bursts and flaps, draw for draw."""
    rng = random.Random(seed)
    out = []
    for _ in range(frames):
        if setting.loss and rng.random() < setting.loss:
            out.append(())
            continue
        copies = 2 if setting.duplicate and rng.random() < setting.duplicate else 1
        delays = []
        for _ in range(copies):
            delay = setting.delay
            if setting.reorder and rng.random() < setting.reorder:
                delay += rng.uniform(0.2, 1.0) * setting.reorder_delay
            delays.append(delay)
        out.append(tuple(delays))
    return out


def test_settings_without_bursts_meet_the_same_decisions_as_before() -> None:
    setting = Impairment(loss=0.02, duplicate=0.01, reorder=0.05, delay=0.001)
    faults = LinkFaults("20261121:ncs0:3-ncs1:3:ab", setting)
    assert [faults.fate(0.0) for _ in range(20_000)] == old_fates(
        "20261121:ncs0:3-ncs1:3:ab", setting, 20_000
    )


def test_a_flap_takes_the_link_down_for_the_set_interval_then_back() -> None:
    faults = LinkFaults("1:l:ab", Impairment(down_after=2.0, down_for=1.0), now=100.0)
    assert [faults.is_down(100.0 + t) for t in (0.0, 1.999, 2.0, 2.5, 2.999, 3.0, 50.0)] == [
        False,
        False,
        True,
        True,
        True,
        False,
        False,
    ]
    assert faults.fate(102.5) == ()
    assert faults.fate(103.5) == (0.0,)
    assert (faults.lost, faults.down_lost) == (1, 1)


def test_a_periodic_flap_repeats_and_a_new_setting_restarts_the_schedule() -> None:
    faults = LinkFaults("1:l:ab", Impairment(down_after=1.0, down_for=0.5, down_every=4.0))
    down = [t / 10 for t in range(0, 130) if faults.is_down(t / 10)]
    assert down == [1.0, 1.1, 1.2, 1.3, 1.4, 5.0, 5.1, 5.2, 5.3, 5.4, 9.0, 9.1, 9.2, 9.3, 9.4]
    faults.apply(Impairment(down_after=1.0, down_for=0.5, down_every=4.0), now=10.0)
    assert not faults.is_down(10.9) and faults.is_down(11.0) and not faults.is_down(11.5)
    faults.apply(Impairment(), now=20.0)
    assert not any(faults.is_down(20.0 + t / 10) for t in range(100))


def test_frames_lost_while_down_do_not_move_the_generator() -> None:
    """A flap changes which frames are lost, not the decisions for the frames that pass."""
    setting = Impairment(loss=0.1, down_after=1.0, down_for=1.0)
    flapping = LinkFaults("3:l:ab", setting)
    steady = LinkFaults("3:l:ab", Impairment(loss=0.1))
    times = [i / 100 for i in range(300)]
    passed = [flapping.fate(t) for t in times if not flapping.is_down(t)]
    assert passed == [steady.fate(0.0) for _ in passed]


@pytest.mark.parametrize(
    "bad",
    [
        {"loss": 1.5},
        {"duplicate": -0.1},
        {"burst_enter": 0.1},  # the bad state would never end
        {"down_for": 2.0, "down_every": 1.0},
        {"down_after": -1.0},
    ],
)
def test_settings_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Impairment(**bad)


def test_descriptions_name_the_models() -> None:
    assert Impairment(loss=0.01, duplicate=0.01).describe() == "loss 1%, duplicate 1%"
    bursty = Impairment(burst_enter=0.01, burst_exit=0.25).describe()
    assert bursty.startswith("bursty loss 3.8% on average (bursts of 4 frames")
    assert (
        Impairment(down_after=5, down_for=2, down_every=30)
        .describe()
        .endswith("down 2 s from 5 s, every 30 s")
    )
    assert not Impairment().active() and Impairment(down_for=1).active()


# -- the emulator applying them, on unix sockets instead of interfaces ---------------------------


@pytest.fixture
def emulator() -> Iterator[tuple[LinkEmulator, socket.socket, socket.socket]]:
    """One link whose ends are unix datagram sockets: frames written to ``sender`` are read
    by the emulator and forwarded to ``receiver``."""
    emu = LinkEmulator([], seed=1, ring_slots=0)
    into_emu, sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    out_of_emu, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for sock in (into_emu, receiver):
        sock.setblocking(False)
    direction = Direction("l", out_of_emu, LinkFaults("1:l:ab"))
    emu.socks[into_emu.fileno()] = into_emu
    emu.route[into_emu.fileno()] = direction
    emu.by_link["l"] = [direction]
    yield emu, sender, receiver
    for sock in (into_emu, sender, out_of_emu, receiver):
        sock.close()


def received(receiver: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(receiver.recv(2048))
        except BlockingIOError:
            return out


def command(emu: LinkEmulator, **request: object) -> dict[str, object]:
    return emu._command(json.dumps(request).encode())


def test_a_flap_set_at_run_time_drops_frames_until_the_link_comes_back(
    emulator: tuple[LinkEmulator, socket.socket, socket.socket],
) -> None:
    emu, sender, receiver = emulator
    assert command(emu, op="set", faults={"down_for": 0.3}, links=["l"]) == {
        "ok": True,
        "links": 1,
    }
    for i in range(10):
        sender.send(b"down %d" % i)
    emu._drain_socket(next(iter(emu.socks)))
    assert received(receiver) == []
    time.sleep(0.35)
    sender.send(b"back")
    emu._drain_socket(next(iter(emu.socks)))
    assert received(receiver) == [b"back"]
    totals = command(emu, op="stats")["totals"]
    assert isinstance(totals, dict)
    assert (totals["forwarded"], totals["lost"], totals["down_lost"]) == (1, 10, 10)


def test_an_unimpaired_link_forwards_every_frame_unchanged(
    emulator: tuple[LinkEmulator, socket.socket, socket.socket],
) -> None:
    emu, sender, receiver = emulator
    frames = [bytes([i]) * (i + 1) for i in range(50)]
    for frame in frames:
        sender.send(frame)
    emu._drain_socket(next(iter(emu.socks)))
    assert received(receiver) == frames


def test_bad_commands_are_answered_not_fatal(
    emulator: tuple[LinkEmulator, socket.socket, socket.socket],
) -> None:
    emu, _, _ = emulator
    assert command(emu, op="set", faults={"loss": 2}, links=["l"])["ok"] is False
    assert command(emu, op="set", faults={"loss": 0.1}, links=["nope"])["ok"] is False
    assert command(emu, op="dance")["ok"] is False
    assert command(emu, op="set", faults={"loss": 0.1})["ok"] is True


def test_idle_ticks_end_a_burst_on_a_quiet_link() -> None:
    """Frames 1 s apart with a 1 ms tick: the chain forgets its state between frames, so
    losses come singly at the average rate instead of in bursts that span seconds."""
    ticking = Impairment(burst_enter=0.01, burst_exit=0.2, burst_tick=0.001)
    faults = LinkFaults("1:link:ab", ticking)
    lost = [not faults.fate(float(second)) for second in range(1, 50_001)]
    runs = burst_lengths(lost)
    assert sum(lost) / len(lost) == pytest.approx(ticking.mean_loss(), rel=0.1)
    assert sum(runs) / len(runs) < 1.1
    # back to back (no idle time) the same setting keeps its bursts of 5 frames
    dense = burst_lengths(losses(LinkFaults("1:link:ab", ticking)))
    assert sum(dense) / len(dense) == pytest.approx(5.0, rel=0.1)


def test_the_chance_of_staying_bad_decays_with_idle_ticks() -> None:
    faults = LinkFaults("1:l:ab", Impairment(burst_enter=0.1, burst_exit=0.3, burst_tick=0.01))
    faults.bad = True
    assert faults._bad_chance(0.0) == pytest.approx(0.7)  # one step: stay with 1 - exit
    faults.bad = True
    assert faults._bad_chance(0.01) == pytest.approx(0.25 + 0.75 * 0.6**2)  # two steps
    faults.bad = True
    assert faults._bad_chance(10.01) == pytest.approx(0.25)  # long idle: the stationary share
