"""``make run``: bring up a dragonfly of BMv2 switches, program it, open the Mininet CLI.

    python -m mininet_topos.network.run --topo df:2,4,2 [--log-level debug] [--pcap] [--world]

Besides Mininet's own commands the CLI has ``comm``, ``free``, ``comms``, ``coll``,
``counters``, ``tables``, ``barrier`` and ``restart`` (``help <command>`` explains each).
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
from collections.abc import Callable
from pathlib import Path

from mininet.cli import CLI

from controller import wire
from controller.p4info import ProgramError
from controller.runtime import CommunicatorError
from controller.switch_state import CapacityError
from controller.topology import TopologyError
from host_agents.report import format_table
from host_agents.workload import CollectiveTest, Workload
from mininet_topos.links.options import add_link_arguments, links_or_exit
from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions


def add_network_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topo",
        default="df:2,2,1",
        help="df:P,A,H[:absolute|relative|circulant], single:N or line:K,M",
    )
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/netcoll-run"))
    parser.add_argument("--log-dir", type=Path, default=Path("logs"))
    parser.add_argument(
        "--log-level",
        default=None,
        help="BMv2 per-packet log level (debug, trace); off by default: it slows BMv2 ten-fold",
    )
    parser.add_argument(
        "--pcap", action="store_true", help="BMv2 writes a pcap per port into the log directory"
    )
    parser.add_argument(
        "--replication",
        default="auto",
        choices=["auto", "subset", "all_ports"],
        help="how child bitmaps are replicated",
    )
    parser.add_argument(
        "--membership",
        default="p4runtime",
        choices=["p4runtime", "mp"],
        help="path that installs broadcast trees",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds a switch may take to come up"
    )
    parser.add_argument(
        "--queue-depth",
        type=int,
        default=1024,
        help="BMv2 egress queue depth in packets (BMv2's default, 64, drops 72-way bursts)",
    )
    parser.add_argument(
        "--mtu",
        type=int,
        default=wire.JUMBO_MTU,
        help=f"MTU of every link (default {wire.JUMBO_MTU}, jumbo frames; {wire.MTU} for "
        "standard Ethernet); agents cut messages into segments that fit it",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="control-plane log on the console"
    )
    add_link_arguments(parser)


def options_from(args: argparse.Namespace) -> NetworkOptions:
    links, dilation = links_or_exit(args)
    return NetworkOptions(
        links=links,
        dilation=dilation,
        spec=args.topo,
        build_dir=args.build_dir,
        run_dir=args.run_dir,
        log_dir=args.log_dir,
        log_level=args.log_level,
        pcap=args.pcap,
        replication=args.replication,
        membership=args.membership,
        ready_timeout=args.timeout,
        queue_depth=args.queue_depth,
        mtu=args.mtu,
    )


class NetcollCLI(CLI):
    prompt = "netcoll> "

    def __init__(self, net: NetcollNetwork) -> None:
        self.netcoll = net
        assert net.mininet is not None
        super().__init__(net.mininet)

    def _members(self, text: str) -> tuple[int, ...]:
        topo = self.netcoll.topo
        if text in ("", "all"):
            return tuple(h.node_id for h in topo.hosts)
        return tuple(int(n) for n in text.split(","))

    def do_comm(self, line: str) -> None:
        """comm [all|NODE,NODE,...]: create a communicator (switch state installed)."""
        try:
            comm_id, seconds = self.netcoll.create_comm(self._members(line.strip()))
            print(f"communicator {comm_id} installed in {seconds * 1e3:.1f} ms")
        except Exception as exc:
            print(f"error: {exc}")

    def do_free(self, line: str) -> None:
        """free COMM: remove a communicator and its switch state."""
        try:
            self.netcoll.free_comm(int(line.strip()))
            print(f"communicator {line.strip()} freed")
        except Exception as exc:
            print(f"error: {exc}")

    def do_comms(self, _line: str) -> None:
        """comms: list the communicators and their members."""
        assert self.netcoll.control is not None
        for comm_id, comm in sorted(self.netcoll.control.comms.items()):
            print(f"{comm_id}: {len(comm.members)} members {comm.members}")

    def do_coll(self, line: str) -> None:
        """coll COLLECTIVE ALGORITHM SIZES [ITERATIONS] [ROOT] [COMM|all]:
        run a collective on every member, e.g. `coll bcast innet 1,16384 10 0`."""
        parts = line.split()
        if len(parts) < 3:
            print("usage: coll COLLECTIVE ALGORITHM SIZES [ITERATIONS] [ROOT] [all|NODE,...]")
            return
        try:
            sizes = tuple(int(s) for s in parts[2].split(","))
            iterations = int(parts[3]) if len(parts) > 3 else 10
            root = int(parts[4]) if len(parts) > 4 else 0
            members = self._members(parts[5] if len(parts) > 5 else "all")
            test = CollectiveTest(parts[0], parts[1], sizes, iterations, 1, root)
            with self.netcoll.communicator(members) as (comm_id, _):
                workload = Workload(comm_id, members, [test], seed=random.randrange(1 << 31))
                result = self.netcoll.launcher().launch(workload)
            print(format_table(result.rows))
            print("OK" if result.ok else f"FAILED: {result.errors[:5]} wrong={result.wrong}")
        except Exception as exc:
            print(f"error: {exc}")

    def do_counters(self, line: str) -> None:
        """counters SWITCH_INDEX: drop counters by reason."""
        try:
            index = int(line.strip() or 0)
            print(self.netcoll.call(self.netcoll.control.drop_counters(index)))  # type: ignore[union-attr]
        except Exception as exc:
            print(f"error: {exc}")

    def do_tables(self, line: str) -> None:
        """tables SWITCH_INDEX: number of entries per table and of multicast groups."""
        try:
            switch = self.netcoll.control.switches[int(line.strip() or 0)]  # type: ignore[union-attr]
            print(self.netcoll.call(switch.read_tables()))
        except Exception as exc:
            print(f"error: {exc}")

    def do_restart(self, line: str) -> None:
        """restart SWITCH_INDEX: kill a switch's BMv2 process and start a fresh one on the same
        ports (tables, groups and registers lost); returns once the control plane has
        programmed it again."""
        if not line.strip().isdigit():
            print("usage: restart SWITCH_INDEX")
            return
        try:
            index = int(line)
            seconds = self.netcoll.restart_switch(index)
            print(f"switch {index} restarted and programmed again in {seconds:.1f} s")
        except Exception as exc:
            print(f"error: {exc}")

    def do_barrier(self, line: str) -> None:
        """barrier SWITCH_INDEX COMM: a barrier slot read back by mini packet."""
        try:
            index, comm = (int(x) for x in line.split())
            print(self.netcoll.call(self.netcoll.control.barrier_state(index, comm)))  # type: ignore[union-attr]
        except Exception as exc:
            print(f"error: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_network_arguments(parser)
    parser.add_argument(
        "--world", action="store_true", help="create a communicator of every host at start"
    )
    parser.add_argument("--no-cli", action="store_true", help="bring up, report, tear down")
    args = parser.parse_args(argv)

    def session(net: NetcollNetwork) -> int:
        if args.world:
            comm_id, seconds = net.create_comm(tuple(h.node_id for h in net.topo.hosts))
            print(f"*** communicator {comm_id} of every host installed in {seconds * 1e3:.1f} ms")
        if not args.no_cli:
            NetcollCLI(net)
        return 0

    return with_network(args, "bringing up", session)


def with_network(args: argparse.Namespace, what: str, body: Callable[[NetcollNetwork], int]) -> int:
    """Bring the network of ``args`` up, run ``body`` on it, always tear it down; errors a user
    can cause (a bad shape, a switch that does not start, a full table) end with one line."""
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        net = NetcollNetwork(options_from(args))
        print(
            f"*** {what} {args.topo}: {net.topo.num_hosts} hosts, {net.topo.num_switches} switches"
        )
        with net:
            print(f"*** {net.report}")
            return body(net)
    except (BringUpError, TopologyError, CapacityError, ProgramError, CommunicatorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
