"""``with NetcollNetwork(...) as net`` brings the network up and always tears it down: after
the block, after an error inside it, and after a bring-up that failed half-way (no Mininet
network needed: start and stop are stand-ins that record the calls)."""

from __future__ import annotations

import pytest

pytest.importorskip("mininet.net", reason="Mininet is not importable (make deps)")

from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions

pytestmark = pytest.mark.unit


class Recording(NetcollNetwork):
    def __init__(self, fail_start: bool = False) -> None:
        super().__init__(NetworkOptions(spec="df:2,2,1"))
        self.calls: list[str] = []
        self.fail_start = fail_start

    def start(self):  # type: ignore[no-untyped-def]
        self.calls.append("start")
        if self.fail_start:
            raise BringUpError("switch ncs3 did not start")
        return self.report

    def stop(self) -> None:
        self.calls.append("stop")


def test_the_block_runs_on_a_started_network_and_stops_it() -> None:
    net = Recording()
    with net as running:
        assert running is net
        assert net.calls == ["start"]
    assert net.calls == ["start", "stop"]


def test_an_error_in_the_block_still_stops_the_network() -> None:
    net = Recording()
    with pytest.raises(KeyboardInterrupt), net:
        raise KeyboardInterrupt
    assert net.calls == ["start", "stop"]


def test_a_failed_bring_up_stops_what_came_up_and_skips_the_block() -> None:
    net = Recording(fail_start=True)
    ran = False
    with pytest.raises(BringUpError, match="ncs3"), net:
        ran = True
    assert not ran
    assert net.calls == ["start", "stop"]
