"""The CPU one BMv2 switch spends per frame, alone on the machine (docs/performance.md).

One switch in its own namespace (the data-plane harness) with the unit scenarios' state
forwards ``--frames`` unicast frames of 100 bytes from host port 1 to host port 3, ten at a
time every 4 ms (below its rate: none is dropped), and the switch process's CPU (every thread,
from /proc) is divided by the frames forwarded. Needs root and BMv2 (``make BMV2=`` or
NETCOLL_BMV2 picks the build):

    NETCOLL_BMV2=/opt/bmv2-fast/bin/simple_switch_grpc python -m tests.dataplane.frame_cost
"""

from __future__ import annotations

import argparse
import sys
import time

from controller.wire import Op
from mininet_topos.experiments.measure import process_cpu_seconds
from mininet_topos.network.single_switch import SingleSwitchLab
from mininet_topos.tooling.machine import default_bmv2
from tests.dataplane_scenarios import ALL_PORTS, base_state, frame
from tests.requirements import BUILD_DIR, switch_unavailable

BURST = 10
PAUSE_S = 0.004


def switch_cpu_seconds(pid: int) -> float:
    seconds = process_cpu_seconds(pid)  # every thread of the process
    if seconds is None:
        raise RuntimeError(f"the switch (pid {pid}) exited during the measurement")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=8000)
    args = parser.parse_args(argv)
    reason = switch_unavailable()
    if reason is not None:
        print(f"skipped: {reason}")
        return 1
    with SingleSwitchLab(BUILD_DIR, ALL_PORTS) as lab:
        lab.configure(base_state(lab))
        assert lab.bmv2 is not None and lab.bmv2.proc is not None
        pid = lab.bmv2.proc.pid
        unicast = frame(Op.UNICAST, src=1, dst=3, payload=bytes(100))
        into, out = lab.sockets[1], lab.sockets[3]
        forwarded = 0

        def drain() -> int:
            n = 0
            while True:
                try:
                    out.recv(65536)
                except BlockingIOError:
                    return n
                n += 1

        cpu_before, started = switch_cpu_seconds(pid), time.monotonic()
        for sent in range(1, args.frames + 1):
            into.send(unicast)
            if sent % BURST == 0:
                time.sleep(PAUSE_S)
                forwarded += drain()
        time.sleep(1.0)
        forwarded += drain()
        cpu = switch_cpu_seconds(pid) - cpu_before
        wall = time.monotonic() - started
    print(
        f"{default_bmv2()}: {forwarded} of {args.frames} frames forwarded in {wall:.1f} s; "
        f"switch CPU {cpu:.2f} s, {cpu / max(forwarded, 1) * 1e6:.0f} us per frame "
        f"(one ingress and one egress pass)"
    )
    return 0 if forwarded == args.frames else 1


if __name__ == "__main__":
    sys.exit(main())
