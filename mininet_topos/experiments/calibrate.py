"""``make calibrate``: choose this machine's dilation factor for a paper's links.

Brings the network up on the paper's links dilated by a pilot factor, runs a few operations
of each pilot cell (the heaviest of the reproductions: a host barrier, a binomial broadcast
and a ring allgather on every rank), and reads each one's CPU per operation (every process:
switches, agents, link emulator, harness) and time per operation. A network-bound time grows
with the factor while the CPU per operation does not, so the factor that brings the heaviest
cell's CPU to 40% of the cores follows (links/dilation.py). When the pilot was CPU-bound its
time is not the network's, so the pilot runs again at the factor it pointed to, up to
``--rounds`` times. Writes docs/calibration.json, which ``--dilation auto`` reads.

    python -m mininet_topos.experiments.calibrate --topo df:2,4,2 [--pilot 20000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from host_agents.workload import CollectiveTest, Workload
from mininet_topos.experiments.measure import LinkMeter, columns_for, metered_launch
from mininet_topos.links.dilation import DEFAULT_PROFILE, PAPERS, Calibration, choose_factor
from mininet_topos.links.options import DEFAULT_CALIBRATION
from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions
from mininet_topos.network.bmv2 import describe
from mininet_topos.tooling.machine import default_bmv2

PILOT_CELLS = (
    CollectiveTest("barrier", "gather_bcast", (0,), 5, 1, sync=False),
    CollectiveTest("bcast", "binomial", (16384,), 3, 1, root=0),
    CollectiveTest("allgather", "ring", (1024,), 3, 1),
)


@dataclass
class Pilot:
    cell: str
    cpu_per_op_s: float
    time_per_op_s: float
    verdict: str

    def factor(self, pilot_factor: float, cores: int) -> float:
        return choose_factor(self.cpu_per_op_s, self.time_per_op_s / pilot_factor, cores)


def pilot_cell(net: NetcollNetwork, meter: LinkMeter, comm_id: int, test: CollectiveTest) -> Pilot:
    members = tuple(h.node_id for h in net.topo.hosts)
    run = metered_launch(
        net, meter, Workload(comm_id, members, [test], seed=1), columns_for(test.collective)
    )
    name = f"{test.collective} {test.algorithm} {test.sizes[0]} B"
    span = run.result.timed_span()
    if run.result.errors or span is None:
        raise BringUpError(f"pilot {name} failed: {run.result.errors[:2]}")
    start, end = span
    cpu = run.cpu_between(start, end)
    # the window holds the warm-up and the synchronising barriers too: their CPU is counted
    # against every operation, which errs towards a larger factor
    operations = test.iterations + test.warmup
    times = [row.avg_us * 1e-6 for row in run.result.rows]
    return Pilot(
        name,
        cpu_per_op_s=sum(cpu.total_s.values()) / operations,
        time_per_op_s=statistics.median(times) if times else (end - start) / operations,
        verdict=run.verdict_between(start, end).short(),
    )


def measure(args: argparse.Namespace, factor: float) -> list[Pilot]:
    paper = PAPERS[args.link_profile]
    options = NetworkOptions(
        spec=args.topo,
        build_dir=args.build_dir,
        log_dir=Path("logs/calibrate"),
        links=paper.dilated(factor),
        dilation=factor,
    )
    with NetcollNetwork(options) as net:
        print(f"*** {net.report}; {paper.describe(factor)}", flush=True)
        meter = LinkMeter(net)
        with net.communicator(tuple(h.node_id for h in net.topo.hosts)) as (comm_id, _):
            pilots = []
            for test in PILOT_CELLS:
                pilot = pilot_cell(net, meter, comm_id, test)
                print(
                    f"    {pilot.cell}: {pilot.cpu_per_op_s * 1e3:.0f} ms of CPU and "
                    f"{pilot.time_per_op_s * 1e3:.0f} ms per operation; {pilot.verdict}",
                    flush=True,
                )
                pilots.append(pilot)
    return pilots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topo", default="df:2,4,2")
    parser.add_argument("--link-profile", choices=list(PAPERS), default=DEFAULT_PROFILE)
    parser.add_argument("--pilot", type=float, default=20_000.0, help="the first pilot factor")
    parser.add_argument("--rounds", type=int, default=2, help="pilots at most")
    parser.add_argument("--out", type=Path, default=DEFAULT_CALIBRATION)
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    factor = args.pilot
    try:
        for round_ in range(args.rounds):
            pilots = measure(args, factor)
            heaviest = max(pilots, key=lambda p: p.factor(factor, cores))
            chosen = heaviest.factor(factor, cores)
            print(f"*** pilot {round_ + 1} at {factor:g}x: {heaviest.cell} asks for {chosen:g}x")
            settled = chosen <= factor and all("network-bound" in p.verdict for p in pilots)
            if settled or round_ == args.rounds - 1:
                break
            factor = max(chosen, factor)
    except BringUpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    calibration = Calibration(
        profile=args.link_profile,
        pilot_factor=factor,
        cell=heaviest.cell,
        cpu_per_op_s=heaviest.cpu_per_op_s,
        time_per_op_s=heaviest.time_per_op_s,
        cores=cores,
        bmv2=str(describe(default_bmv2()).get("flavour", "?")),
    )
    calibration.save(args.out)
    print(
        f"*** {args.out}: dilation {calibration.factor:g}x "
        f"({PAPERS[args.link_profile].describe(calibration.factor)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
