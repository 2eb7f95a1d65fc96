"""One BMv2 ``simple_switch_grpc`` process: its command line, start, readiness, stop.

Shared by the Mininet switch node and the single-switch data-plane harness. Readiness means
the process is alive and its P4Runtime (and Thrift, when asked for) endpoints accept
connections, checked against a deadline: never a fixed sleep. A switch that exits or never
listens raises :class:`SwitchStartError` with the tail of its log.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from mininet_topos.tooling.machine import BMV2_ENV, bmv2_flavour, default_bmv2
from mininet_topos.tooling.registry import RunRegistry


def describe(binary: str) -> dict[str, str]:
    """What results record about the switches that produced them."""
    return {"binary": shutil.which(binary) or binary, "flavour": bmv2_flavour(binary)}


def timing_warning(switches: dict[str, str]) -> str | None:
    """A warning to print before timing on a BMv2 build that is not meant for it;
    ``switches`` is what :func:`describe` said (so the binary is read once)."""
    if switches["flavour"] != "logging":
        return None
    return (
        f"warning: {switches['binary']} is BMv2's default (logging) build, several times "
        f"slower than one built for timing; ratios hold, absolute times do not (set "
        f"{BMV2_ENV} or make BMV2=)"
    )


CPU_PORT = 255  # v1model packet-in/out port, outside the data ports
POLL = 0.05


class SwitchStartError(RuntimeError):
    pass


@dataclass
class Bmv2Config:
    name: str
    device_id: int
    ports: dict[int, str]  # port number -> interface name
    grpc_address: str  # "127.0.0.1:50001" or "unix:/path/to.sock"
    run_dir: Path  # notifications socket and the process log live here
    thrift_port: int | None = None
    cpu_port: int = CPU_PORT
    log_level: str | None = None  # None: no per-packet log (fast); "debug"/"trace" for debugging
    pcap_dir: Path | None = None
    netns: str | None = None  # run inside this named network namespace
    binary: str = field(default_factory=default_bmv2)
    extra_args: list[str] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def command(self) -> list[str]:
        cmd = [self.binary, "--device-id", str(self.device_id), "--no-p4"]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        if self.thrift_port is not None:
            cmd += ["--thrift-port", str(self.thrift_port)]
        cmd += ["--notifications-addr", f"ipc://{self.run_dir}/{self.name}-notifications.ipc"]
        if self.log_level:
            cmd += [
                "--log-file",
                str(self.run_dir / f"{self.name}-packets"),
                "--log-flush",
                "-L",
                self.log_level,
            ]
        if self.pcap_dir is not None:
            cmd += ["--pcap", str(self.pcap_dir)]
        cmd += self.extra_args
        cmd += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(self.cpu_port)]
        if self.netns is not None:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        return cmd


@dataclass(frozen=True)
class Bmv2Options:
    """How the BMv2 switches of one network run. Each switch node holds its network's options
    (never a class attribute), so two networks in one process cannot see each other's."""

    run_dir: Path = Path("/tmp/netcoll-run")
    grpc_base: int = 29100  # switch i serves P4Runtime on grpc_base + i
    thrift_base: int = 19100  # and the Thrift runtime on thrift_base + i
    log_level: str | None = None
    pcap_dir: Path | None = None
    binary: str = field(default_factory=default_bmv2)

    def grpc_address(self, index: int) -> str:
        return f"127.0.0.1:{self.grpc_base + index}"

    def thrift_port(self, index: int) -> int:
        return self.thrift_base + index

    def config(self, name: str, index: int, ports: dict[int, str]) -> Bmv2Config:
        """The process of switch ``index`` (device id ``index + 1``) on ``ports``."""
        return Bmv2Config(
            name=name,
            device_id=index + 1,
            ports=ports,
            grpc_address=self.grpc_address(index),
            run_dir=self.run_dir,
            thrift_port=self.thrift_port(index),
            log_level=self.log_level,
            pcap_dir=self.pcap_dir,
            binary=self.binary,
        )


class Bmv2Process:
    def __init__(self, config: Bmv2Config, registry: RunRegistry | None = None) -> None:
        self.config = config
        self.registry = registry
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if shutil.which(self.config.binary) is None:
            raise SwitchStartError(
                f"{self.config.binary} is not installed (p4lang's p4lang-bmv2 package, or the "
                "Vagrant VM; 'make doctor' lists what is missing)"
            )
        self.config.run_dir.mkdir(parents=True, exist_ok=True)
        log = self.config.log_path.open("wb")
        self.proc = subprocess.Popen(
            self.config.command(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the Mininet CLI does not reach the switch
        )
        log.close()
        if self.registry is not None:
            self.registry.record_process(self.proc.pid, f"bmv2 {self.config.name}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Block until the switch serves P4Runtime (and Thrift); returns seconds waited."""
        started = time.monotonic()
        deadline = started + timeout
        endpoints = [self.config.grpc_address]
        if self.config.thrift_port is not None:
            endpoints.append(f"127.0.0.1:{self.config.thrift_port}")
        for endpoint in endpoints:
            while not self._accepts(endpoint):
                if not self.alive():
                    raise SwitchStartError(f"switch {self.config.name} exited: {self.log_tail()}")
                if time.monotonic() > deadline:
                    raise SwitchStartError(
                        f"switch {self.config.name} does not listen on {endpoint} after "
                        f"{timeout:.0f} s: {self.log_tail()}"
                    )
                time.sleep(POLL)
        return time.monotonic() - started

    def _accepts(self, endpoint: str) -> bool:
        if self.config.netns is not None and not endpoint.startswith("unix:"):
            return self.alive()  # inside a namespace only the unix socket is reachable
        if endpoint.startswith("unix:"):
            family, address = socket.AF_UNIX, endpoint.removeprefix("unix:").removeprefix("//")
            if not os.path.exists(address):
                return False
            target: str | tuple[str, int] = address
        else:
            host, _, port = endpoint.rpartition(":")
            family, target = socket.AF_INET, (host or "127.0.0.1", int(port))
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            try:
                sock.connect(target)
            except OSError:
                return False
        return True

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.config.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self.proc = None
