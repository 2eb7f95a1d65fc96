"""Bring a netcoll network up and down: Mininet hosts and links, BMv2 switches, the control
plane, the communicator service.

    with NetcollNetwork(NetworkOptions(spec="df:2,4,2")) as net:
        print(net.report)         # bring-up time, measured phase by phase
        ...                       # net.launcher(), net.control, net.mininet

Leaving the block tears everything down, also when the bring-up itself failed half-way.

The control plane runs on an asyncio loop in a background thread, so the Mininet CLI stays
responsive; :meth:`NetcollNetwork.call` runs a coroutine there and waits, bounded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mininet.net import Mininet

from controller import topology_build, wire
from controller.callers import NetnsCallers
from controller.desired_state import Membership
from controller.drivers.p4runtime import SwitchEndpoint
from controller.drivers.thrift import ThriftClient, ThriftUnavailable
from controller.runtime import ControlPlane
from controller.service import CommService
from host_agents.launcher import Launcher
from host_agents.port import SOCKET_BUFFER_BYTES, RawSocketPort
from mininet_topos.links import emulator_process
from mininet_topos.links.bringup import LinkPlan
from mininet_topos.links.linkfaults import Impairment
from mininet_topos.links.shaping import LinkModel
from mininet_topos.links.timing import control_time_scale, frame_scaling, time_scale
from mininet_topos.network.bmv2 import Bmv2Options
from mininet_topos.network.bringup import BringUp, LoopThread, exit_on_sigterm
from mininet_topos.network.interfaces import (
    configure_interfaces,
    port_free,
    raise_socket_buffer_limits,
    timers_for,
    windows_for,
)
from mininet_topos.network.nodes import Bmv2Switch, RecordedHost, RecordedLink
from mininet_topos.network.topos import NetcollTopo
from mininet_topos.tooling.cleanup import stop_run
from mininet_topos.tooling.machine import default_bmv2
from mininet_topos.tooling.registry import RunRegistry

LOG = logging.getLogger(__name__)
T = TypeVar("T")


class BringUpError(RuntimeError):
    pass


@dataclass
class NetworkOptions:
    spec: str = "df:2,2,1"
    build_dir: Path = Path("build")
    run_dir: Path = Path("/tmp/netcoll-run")
    log_dir: Path = Path("logs")
    program: str = "netcoll"
    log_level: str | None = None  # BMv2 per-packet log level; None keeps BMv2 fast
    pcap: bool = False
    replication: str = "auto"
    membership: str = "p4runtime"
    ready_timeout: float = 60.0
    queue_depth: int = 1024  # BMv2 egress queue, packets (its default of 64 drops bursts)
    mtu: int = wire.JUMBO_MTU  # every link; agents cut messages into MTU-sized segments
    emulate_links: bool = False  # route host and switch links through the seeded emulator
    links: LinkModel = field(default_factory=LinkModel)  # rates, delays, queues; unshaped
    dilation: float | None = None  # the factor ``links`` was dilated by, for reports
    faults: Impairment | None = None  # impairment of every emulated link at start
    fault_seed: int = 1
    grpc_base: int = 29100  # below the ephemeral range (32768+): no client socket takes it
    thrift_base: int = 19100
    bmv2: str = field(default_factory=default_bmv2)  # simple_switch_grpc to run (path/name)


class NetcollNetwork:
    def __init__(self, options: NetworkOptions) -> None:
        self.options = options
        self.topo = topology_build.parse_spec(options.spec)
        self.registry: RunRegistry | None = None
        self.mininet: Mininet | None = None
        self.control: ControlPlane | None = None
        self.service: CommService | None = None
        self.loop: LoopThread | None = None
        self.emulated: list[Any] = []
        self.emulator: subprocess.Popen[bytes] | None = None
        self.link_plan = LinkPlan(options.links)
        self.report = BringUp(switches=self.topo.num_switches, hosts=self.topo.num_hosts)

    @property
    def topology_file(self) -> Path:
        return self.options.run_dir / "topology.json"

    @property
    def network_file(self) -> Path:
        return self.options.run_dir / "network.json"

    @property
    def service_path(self) -> Path:
        return self.options.run_dir / "service.sock"

    # -- bring-up ------------------------------------------------------------------------------

    def __enter__(self) -> NetcollNetwork:
        try:
            self.start()
        except BaseException:
            self.stop()  # whatever came up before the failure
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> BringUp:
        opts = self.options
        try:
            wire.max_payload(opts.mtu)
        except ValueError as exc:
            raise BringUpError(str(exc)) from None
        if os.geteuid() != 0:
            raise BringUpError("Mininet needs root: run with sudo")
        for path in (
            opts.build_dir / f"{opts.program}.json",
            opts.build_dir / f"{opts.program}.p4info.txtpb",
        ):
            if not path.exists():
                raise BringUpError(f"{path} is missing: run 'make build'")
        self._check_ports()
        if threading.current_thread() is threading.main_thread():
            # `kill` (SIGTERM) unwinds like Ctrl-C, so leaving the `with` block tears it down
            signal.signal(signal.SIGTERM, exit_on_sigterm)
        started = time.perf_counter()
        shutil.rmtree(opts.run_dir, ignore_errors=True)
        opts.run_dir.mkdir(parents=True)
        opts.log_dir.mkdir(parents=True, exist_ok=True)
        self.registry = RunRegistry(f"net-{os.getpid()}")
        self.registry.record_file(opts.run_dir)
        bmv2 = Bmv2Options(
            run_dir=opts.run_dir,
            grpc_base=opts.grpc_base,
            thrift_base=opts.thrift_base,
            log_level=opts.log_level,
            pcap_dir=opts.log_dir if opts.pcap else None,
            binary=opts.bmv2,
        )

        self.link_plan = LinkPlan.for_links(opts.links)
        relay = opts.emulate_links or self.link_plan.relay_delays
        mininet_topo = NetcollTopo(net=self.topo, relay=relay)
        self.emulated = mininet_topo.emulated
        self.mininet = Mininet(
            topo=mininet_topo,
            switch=functools.partial(Bmv2Switch, options=bmv2, registry=self.registry),
            host=functools.partial(RecordedHost, registry=self.registry),
            link=functools.partial(RecordedLink, registry=self.registry),
            controller=None,
            autoSetMacs=False,
            build=False,
        )
        self.mininet.build()
        root_nodes = [*self.mininet.switches, self.mininet.get(self.topo.management.name)]
        if self.emulated:
            root_nodes.append(self.mininet.get(NetcollTopo.RELAY))
        configure_interfaces(self.mininet, self.topo, root_nodes, opts.run_dir, opts.mtu)
        raise_socket_buffer_limits(SOCKET_BUFFER_BYTES)
        self.link_plan.apply(self.mininet, self.topo, opts.mtu, opts.run_dir)
        if relay:
            self._start_emulator()
            if self.link_plan.relay_delays:
                self.set_faults(opts.faults or Impairment())  # each link's propagation delay
        self.report.mininet_s = time.perf_counter() - started

        phase = time.perf_counter()
        self.mininet.start()  # starts every BMv2 process
        for switch in self.mininet.switches:
            remaining = opts.ready_timeout - (time.perf_counter() - phase)
            try:
                switch.wait_ready(max(1.0, remaining))
            except Exception as exc:
                raise BringUpError(f"switch {switch.name} did not start: {exc}") from exc
        self._tune_queues()
        self.report.switches_s = time.perf_counter() - phase

        phase = time.perf_counter()
        self._write_topology()
        self.loop = LoopThread()
        endpoints = {
            sw.index: SwitchEndpoint(sw.name, sw.grpc_address, sw.index + 1)
            for sw in self.mininet.switches
        }
        mgmt_intf = f"{self.topo.management.name}-eth0"
        self.control = ControlPlane(
            self.topo,
            opts.build_dir,
            endpoints,
            RawSocketPort(mgmt_intf),
            program=opts.program,
            log_dir=opts.log_dir,
            replication=opts.replication,
            membership=Membership(opts.membership),
        )
        control = self.control
        self.loop.call(control.start(opts.ready_timeout), opts.ready_timeout + 10)
        # the service tells callers apart by the network namespace of the connecting process
        host_pids = {h.node_id: self.mininet.get(h.name).pid for h in self.topo.hosts}
        self.service = CommService(
            control, self.service_path, callers=NetnsCallers.from_host_pids(host_pids)
        )
        self.loop.call(self.service.start(), 10)
        self.report.programming_s = time.perf_counter() - phase
        self.report.total_s = time.perf_counter() - started
        return self.report

    # -- faults ------------------------------------------------------------------------------

    @property
    def emulator_socket(self) -> Path:
        return self.options.run_dir / "linkemu.sock"

    def _start_emulator(self) -> None:
        """The seeded link emulator between the two ends of every emulated link."""
        assert self.registry is not None
        opts = self.options
        try:
            self.emulator = emulator_process.start_emulator(
                opts.run_dir,
                self.emulator_socket,
                self.emulated,
                opts.fault_seed,
                opts.faults,
                self.registry,
            )
        except emulator_process.EmulatorStartError as exc:
            raise BringUpError(str(exc)) from None

    def set_faults(self, impairment: Impairment, links: list[str] | None = None) -> int:
        """Impair every emulated link, or only ``links`` (names as in ``self.emulated``);
        a delayed link keeps its propagation delay under any setting."""
        return emulator_process.set_faults(
            self.emulator_socket, self.emulated, self.link_plan, impairment, links
        )

    def reshape(self, links: LinkModel) -> None:
        """New link rates or queues while the network runs (agents launched after it get
        timers for them)."""
        self.link_plan.reshape(
            links, self.mininet, self.topo, self.options.mtu, self.options.run_dir
        )
        self.options = dataclasses.replace(self.options, links=links)
        if self.link_plan.relay_delays and self.emulated:  # the emulator serialises at the rate
            self.set_faults(self.options.faults or Impairment())

    def fault_stats(self) -> dict[str, Any]:
        return emulator_process.stats(self.emulator_socket)

    def restart_switch(self, index: int, timeout: float = 60.0) -> float:
        """Kill a switch's BMv2 process and start a fresh one on the same ports; returns the
        seconds until the control plane had programmed it again."""
        if self.mininet is None or self.control is None:
            raise BringUpError("the network is not running")
        switch = next((s for s in self.mininet.switches if s.index == index), None)
        if switch is None:
            raise ValueError(f"no switch {index}: the switches are 0..{self.topo.num_switches - 1}")
        started = time.perf_counter()
        connections = self.control.switches[index].connections
        switch.restart(timeout)
        with ThriftClient(switch.thrift_port) as client:
            client.set_queue_depth(self.options.queue_depth)
        self.call(self.control.wait_reprogrammed(index, connections, timeout), timeout + 5)
        return time.perf_counter() - started

    def _tune_queues(self) -> None:
        """Deepen every egress queue over BMv2's Thrift runtime (P4Runtime cannot)."""
        assert self.mininet is not None
        try:
            for switch in self.mininet.switches:
                with ThriftClient(switch.thrift_port) as client:
                    client.set_queue_depth(self.options.queue_depth)
        except ThriftUnavailable as exc:
            LOG.warning("egress queues keep BMv2's default depth: %s", exc)

    def _check_ports(self) -> None:
        opts = self.options
        busy = [
            port
            for i in range(self.topo.num_switches)
            for port in (opts.grpc_base + i, opts.thrift_base + i)
            if not port_free(port)
        ]
        if busy:
            raise BringUpError(
                f"TCP ports {busy[:5]} are in use (another netcoll network? run 'make stop')"
            )

    def _write_topology(self) -> None:
        assert self.mininet is not None
        realised = {
            "topology": self.topology_file.name,
            "switches": {
                sw.name: {
                    "grpc": sw.grpc_address,
                    "thrift_port": sw.thrift_port,
                    "device_id": sw.index + 1,
                }
                for sw in self.mininet.switches
            },
            "interfaces": {str(h.node_id): f"{h.name}-eth0" for h in self.topo.hosts},
            "management_interface": f"{self.topo.management.name}-eth0",
            "service": str(self.service_path),
        }
        self.topo.save(self.topology_file)
        # the realised network (endpoints, interfaces), for tools outside netcoll to read
        self.network_file.write_text(json.dumps(realised, indent=1))
        self.topo.write_router_edges(self.options.run_dir / "routers.edges")

    # -- use ---------------------------------------------------------------------------------

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        if self.loop is None:
            raise BringUpError("the network is not running")
        return self.loop.call(coro, timeout)

    def launcher(self) -> Launcher:
        assert self.mininet is not None
        net = self.mininet

        workloads = self.options.log_dir / "workloads"

        def spawn(node: int, argv: list[str]) -> Any:
            host = net.get(self.topo.host_by_node(node).name)
            run = Path(argv[argv.index("--workload") + 1]).parent
            log = (run / "logs" / f"{node}.log").open("wb")
            proc = host.popen(argv, stdout=log, stderr=log, cwd=str(Path.cwd()))
            if self.registry is not None:  # so `make stop` ends agents a crash left behind
                with contextlib.suppress(ProcessLookupError):  # it already finished
                    self.registry.record_process(proc.pid, f"host agent {node}")
            return proc

        return Launcher(
            spawn,
            topology_file=self.topology_file,
            service=self.service_path,
            run_dir=workloads,
            interfaces={h.node_id: f"{h.name}-eth0" for h in self.topo.hosts},
            engine_defaults=self._engine_defaults(),
            comm_defaults=timers_for(self.time_scale, self.control_time_scale)[1],
            time_scale=self.time_scale,
        )

    def _engine_defaults(self) -> dict[str, Any]:
        """What agents must agree on with the compiled program (sizes read from P4Info)."""
        if self.control is None:
            return {}
        sizes = self.control.sizes
        return {
            "agg_lanes": sizes.agg_lanes,
            "agg_window": sizes.agg_window,
            "barrier_window": sizes.barrier_window,
            "segment_size": self.segment_size,
            **windows_for(self.segment_size),
            **timers_for(self.time_scale, self.control_time_scale)[0],
            **frame_scaling(self.options.links, self.options.mtu),
        }

    @property
    def time_scale(self) -> float:
        """How much slower per hop the links are than the agents' timers assume."""
        return time_scale(self.options.links, self.options.mtu)

    @property
    def control_time_scale(self) -> float:
        """The same for the barriers' and reductions' small frames."""
        return control_time_scale(self.options.links)

    @property
    def segment_size(self) -> int:
        """Payload bytes per frame on this network's links."""
        return wire.max_payload(self.options.mtu)

    def create_comm(self, members: tuple[int, ...], **kwargs: Any) -> tuple[int, float]:
        """A communicator over ``members``; (comm id, install seconds)."""
        reply = self.operator("create", members=list(members), **kwargs)
        return int(reply["comm_id"]), float(reply["install_seconds"])

    def operator(self, op: str, **params: Any) -> dict[str, Any]:
        """A communicator-service request made as the operator: the same path (validation,
        bookkeeping, all-or-nothing changes) agents take over the socket."""
        assert self.service is not None, "the network is not up"
        return self.call(self.service.handle({"op": op, **params}), 120)

    @contextlib.contextmanager
    def communicator(self, members: tuple[int, ...], **kwargs: Any) -> Iterator[tuple[int, float]]:
        """:meth:`create_comm` for the ``with`` block, freed after it whatever happened, so the
        next user starts from a clean switch state; yields (comm id, install seconds)."""
        comm_id, install = self.create_comm(members, **kwargs)
        try:
            yield comm_id, install
        finally:
            self.free_comm(comm_id)

    def free_comm(self, comm_id: int) -> None:
        """Remove a communicator and its switch state at once (the operator's free)."""
        self.operator("free", comm_id=comm_id)

    # -- teardown ------------------------------------------------------------------------------

    def stop(self) -> None:
        if self.loop is not None:
            try:
                if self.service is not None:
                    self.loop.call(self.service.stop(), 10)
                if self.control is not None:
                    self.loop.call(self.control.stop(), 20)
            except Exception as exc:  # teardown goes on whatever failed
                LOG.warning("stopping the control plane: %s", exc)
            self.loop.stop()
            self.loop = None
        if self.emulator is not None:
            self.emulator.terminate()
            try:
                self.emulator.wait(5)
            except subprocess.TimeoutExpired:
                self.emulator.kill()
            self.emulator = None
        if self.mininet is not None:
            self.mininet.stop()
            self.mininet = None
        if self.registry is not None:
            # whatever Mininet left behind that this run recorded, and nothing else
            self.registry.detach()
            report = stop_run(self.registry.path)
            LOG.info("%s", report)
            self.registry = None
