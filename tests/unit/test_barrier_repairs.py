"""Issue 33: a barrier frame lost anywhere costs about one resend, not one per waiting rank.

On the in-process fabric (the switches are controller/switch_model.py, the reference of the
P4) with 72 ranks on Df(2,4,2), one chosen frame is lost per barrier: a RELEASE between
switches, a RELEASE to one host, an ARRIVE between switches, an ARRIVE from one host. Before
the fix every rank that waited resent: a whole subtree for a lost RELEASE, all 72 ranks for a
lost ARRIVE, and all the others again in the next barrier while the rank that lost its RELEASE
was still recovering it (docs/protocol.md, Barrier repairs).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller import wire
from controller.topology_build import dragonfly
from host_agents.engine import EngineConfig
from tests.fabric import LinkKey
from tests.loss_plans import Chooser, OneLossPerEpoch, resends_per_epoch

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 4, 2)
HOSTS = tuple(h.node_id for h in TOPO.hosts)
HOST_PORTS = {(h.switch, h.port) for h in TOPO.hosts}
# Timers well above what 72 engines in one process take for a lossless barrier on a busy
# machine, in the proportions of the defaults, so only losses make anyone resend
TIMERS = EngineConfig(
    barrier_echo_rto=0.5, barrier_rto=1.0, barrier_stagger=0.5, barrier_rto_max=4.0
)


def between_switches(link: LinkKey) -> bool:
    return link[0] >= 0 and link not in HOST_PORTS


def to_a_host(link: LinkKey) -> bool:
    return link in HOST_PORTS


def from_a_host(link: LinkKey) -> bool:
    return link[0] < 0


def lose_once(op: int, epoch: int, where: Callable[[LinkKey], bool]) -> Chooser:
    return lambda link, hdr: hdr.op == op and hdr.epoch == epoch and where(link)


def test_one_lost_barrier_frame_costs_about_one_resend() -> None:
    plan: dict[int, Chooser] = {
        # epoch 1 waits for every engine to start; epoch 2 loses an ARRIVE outside repair
        # mode (every rank waits long, and so enters it); then one loss of each kind
        2: lose_once(wire.Op.ARRIVE, 2, from_a_host),
        3: lose_once(wire.Op.RELEASE, 3, between_switches),
        4: lose_once(wire.Op.RELEASE, 4, to_a_host),
        6: lose_once(wire.Op.ARRIVE, 6, between_switches),
        7: lose_once(wire.Op.ARRIVE, 7, from_a_host),
    }
    drop_if = OneLossPerEpoch(plan)

    resends = resends_per_epoch(
        TOPO,
        HOSTS,
        TIMERS,
        drop_if,
        8,
        "arrive_retransmissions",
        lambda comm: comm.barrier(algorithm="innet"),
    )
    drop_if.assert_every_loss_happened()
    # an ARRIVE lost on a host's link, outside repair mode and then in it, a RELEASE lost
    # between switches, an ARRIVE lost between switches: one resend (the first member's, or
    # the rank's own) and the one it asks for
    assert resends[2] <= 2, resends
    assert resends[3] <= 2, resends
    assert resends[6] <= 2, resends
    assert resends[7] <= 2, resends
    # a RELEASE lost on its way to one host: its next barrier's ARRIVEs, or its own resend
    assert resends[4] + resends[5] <= 2, resends
    assert resends[1] == resends[8] == 0, resends
