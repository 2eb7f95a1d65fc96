"""On slow links the agents' timers stretch with the frame time, so a timer means the same
number of frame times on any link; unshaped links keep the defaults."""

from __future__ import annotations

import pytest

from host_agents.comm import CommOptions
from host_agents.engine import EngineConfig
from host_agents.transport.stamps import echoed_round_trip, send_stamp
from mininet_topos.links.shaping import LinkModel
from mininet_topos.links.timing import CONTROL_FRAME_BYTES, control_time_scale, time_scale
from mininet_topos.network.interfaces import CONTROL_TIMERS, ENGINE_TIMERS, timers_for

pytestmark = pytest.mark.unit


def test_unshaped_links_keep_every_default() -> None:
    assert time_scale(LinkModel(), 9000) == 1.0
    assert timers_for(1.0) == ({}, {})


def test_the_scale_is_the_slowest_links_frame_time_or_its_delay_in_milliseconds() -> None:
    # a 9014-byte frame at 10 Mb/s takes 7.2 ms; global links at 2 Mb/s, 36 ms
    assert time_scale(LinkModel(rate=10), 9000) == pytest.approx(7.2112)
    assert time_scale(LinkModel(rate=10, global_rate=2), 9000) == pytest.approx(36.056)
    assert time_scale(LinkModel(rate=1000, delay=0.02), 9000) == pytest.approx(20.0)
    # fast links with tiny frames never shrink the timers below the defaults
    assert time_scale(LinkModel(rate=10_000), 1500) == 1.0


def test_every_timer_stretches_by_the_scale_and_nothing_else_changes() -> None:
    engine, comm = timers_for(10.0)
    defaults = EngineConfig()
    assert set(engine) == set(ENGINE_TIMERS) | set(CONTROL_TIMERS)
    assert engine["tail_delay"] == pytest.approx(defaults.tail_delay * 10)
    assert engine["rto_initial"] == pytest.approx(defaults.rto_initial * 10)
    assert comm["progress_timeout"] == pytest.approx(CommOptions().progress_timeout * 10)
    EngineConfig(**engine)  # every name is a real field
    CommOptions(**comm)


# EngineConfig's fields that are not durations: nothing else may be left unstretched
NOT_TIMERS = {"cwnd_initial", "cwnd_max", "byte_scale", "delay_scale"}


def test_every_duration_of_the_engine_is_stretched() -> None:
    # the barrier's echo timer and stagger and the reduction's stagger were added after the
    # list and left out: on 404 kb/s links a rank resent its ARRIVE every 50 ms, doubling,
    # while one frame took 178 ms to cross (make reproduce --dilation 100000)
    durations = {
        name
        for name, value in ((n, getattr(EngineConfig(), n)) for n in EngineConfig.__slots__)
        if isinstance(value, float)
    }
    assert durations - NOT_TIMERS == set(ENGINE_TIMERS) | set(CONTROL_TIMERS)
    assert not set(ENGINE_TIMERS) & set(CONTROL_TIMERS)


def test_barrier_and_reduction_timers_follow_their_small_frames() -> None:
    # a REDUCE of 32 lanes is 182 bytes with its headers: 0.15 ms at 10 Mb/s, so the barrier's
    # and the reduction's timers keep their defaults there while the data timers stretch by
    # the jumbo frame's 7.2 ms. Stretched too, a barrier that lost one frame waited 0.36-0.72 s
    # for a 40 ms round trip (533 ms per barrier at 1% loss on Df(2,4,2))
    assert CONTROL_FRAME_BYTES == 182
    ten = LinkModel(rate=10)
    assert control_time_scale(ten) == 1.0
    engine, _ = timers_for(time_scale(ten, 9000), control_time_scale(ten))
    defaults = EngineConfig()
    assert engine["barrier_rto"] == defaults.barrier_rto
    assert engine["reduce_stagger"] == defaults.reduce_stagger
    assert engine["rto_min"] == pytest.approx(defaults.rto_min * 7.2112)
    # a nobody-waits barrier waits for data repairs: it stretches with the data
    assert engine["barrier_patient_rto"] == pytest.approx(defaults.barrier_patient_rto * 7.2112)
    # a link delay stretches both alike; a slow enough link stretches control frames too
    assert control_time_scale(LinkModel(rate=1000, delay=0.02)) == pytest.approx(20.0)
    assert control_time_scale(LinkModel(rate=0.5)) == pytest.approx(182 * 8 / 0.5e6 / 1e-3)
    assert timers_for(1.0, 2.0)[0]["barrier_rto"] == pytest.approx(2 * defaults.barrier_rto)


def test_stretched_stamps_measure_round_trips_past_the_default_span() -> None:
    unit = 1e-4 * 36  # a 2 Mb/s network's stamp tick
    sent = 100.0
    stamp = send_stamp(sent, unit)
    # a 20 s round trip: beyond the default 6.5 s span, within the stretched one (236 s)
    assert echoed_round_trip(sent + 20.0, stamp, sent, unit) == pytest.approx(20.0, abs=unit)
    assert echoed_round_trip(sent + 20.0, send_stamp(sent), sent) is None
