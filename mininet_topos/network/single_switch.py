"""One BMv2 switch in a namespace of its own, with a veth pair per port: a bench for the data
plane in the spirit of PTF and STF.

The switch runs ``simple_switch_grpc`` inside a fresh network namespace; the test drives the
far end of each port's veth pair with a packet socket and programs the switch over P4Runtime
through a unix socket. :meth:`SingleSwitchLab.send` injects a frame and returns every frame
that came out, on every port: after the frame it sends a *fence* (a unicast to each port's
neighbour, on the same ingress port) and collects until every fence is back, so "nothing else
came out" is known without sleeping.
"""

from __future__ import annotations

import asyncio
import itertools
import select
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from controller import p4info as names
from controller import wire
from controller.drivers.p4runtime import P4RuntimeSwitch, SwitchEndpoint
from controller.drivers.thrift import ThriftClient
from controller.switch_state import PortRole, SwitchState
from mininet_topos.network import netns
from mininet_topos.network.bmv2 import Bmv2Config, Bmv2Process
from mininet_topos.tooling.registry import RunRegistry

T = TypeVar("T")
FENCE_TAG = 0xFECE


class LabError(RuntimeError):
    pass


class SingleSwitchLab:
    def __init__(
        self,
        build_dir: Path,
        ports: tuple[int, ...],
        *,
        program: str = "netcoll",
        replication: str = "subset",
        state_dir: Path | None = None,
        log_level: str | None = None,
        answer_timeout: float = 5.0,
    ) -> None:
        self.json = build_dir / f"{program}.json"
        self.p4info = build_dir / f"{program}.p4info.txtpb"
        for path in (self.json, self.p4info):
            if not path.exists():
                raise LabError(f"{path} is missing: run 'make build'")
        self.ports = ports
        self.replication = replication
        self.tag = uuid.uuid4().hex[:6]
        self.ns = f"nc-dp-{self.tag}"
        self.run_dir = Path(f"/tmp/netcoll-lab-{self.tag}")
        self.registry = RunRegistry(f"lab-{self.tag}", state_dir)
        self.log_level = log_level
        self.answer_timeout = answer_timeout
        self.bmv2: Bmv2Process | None = None
        self.sockets: dict[int, socket.socket] = {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="lab-loop", daemon=True)
        self.p4rt: P4RuntimeSwitch | None = None
        self.state: SwitchState | None = None
        self._fence_ids = itertools.count(1)
        self.frames_sent = 0  # every frame put on a port, fences included

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> SingleSwitchLab:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self._thread.start()
        self.registry.record_file(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        netns.create(self.ns, self.registry)
        intfs = {}
        for port in self.ports:
            switch_side, test_side = f"sw{port}", f"tp{port}"
            netns.add_veth(self.ns, switch_side, test_side)
            intfs[port] = switch_side
        self.config = Bmv2Config(
            name="lab",
            device_id=1,
            ports=intfs,
            grpc_address=f"unix:{self.run_dir}/p4runtime.sock",
            run_dir=self.run_dir,
            thrift_port=9090,
            netns=self.ns,
            log_level=self.log_level,
        )
        self._start_switch()
        for port in self.ports:
            sock = netns.packet_socket(self.ns, f"tp{port}")
            sock.setblocking(False)
            self.sockets[port] = sock

    def close(self) -> None:
        if self.p4rt is not None and self.loop.is_running():
            self._call(self.p4rt.stop(), 10)
            self.p4rt = None
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
        if self.bmv2 is not None:
            self.bmv2.stop()
            self.bmv2 = None
        netns.delete(self.ns)
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        import shutil

        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.registry.close()

    def _start_switch(self) -> None:
        socket_path = self.run_dir / "p4runtime.sock"
        socket_path.unlink(missing_ok=True)
        self.bmv2 = Bmv2Process(self.config, self.registry)
        self.bmv2.start()
        self.bmv2.wait_ready(timeout=30)

    def restart(self) -> None:
        """A fresh switch process on the same ports: every table, group, register and counter
        empty (reinstalling the pipeline would keep BMv2's multicast groups)."""
        if self.p4rt is not None:
            self._call(self.p4rt.stop(), 10)
            self.p4rt = None
        if self.bmv2 is not None:
            self.bmv2.stop()
        self._start_switch()

    def alive(self) -> bool:
        return self.bmv2 is not None and self.bmv2.alive()

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # -- programming -------------------------------------------------------------------------

    def configure(self, state: SwitchState) -> None:
        """Restart the switch empty and push ``state``'s tables and groups over P4Runtime;
        register slots are left to the test's mini packets."""
        self.restart()
        self.state = state

        async def connect() -> P4RuntimeSwitch:
            switch = P4RuntimeSwitch(
                SwitchEndpoint("lab", f"unix:{self.run_dir}/p4runtime.sock", 1),
                self.p4info,
                self.json,
                desired=lambda: state,
            )
            switch.start()
            await switch.wait_ready(30)
            return switch

        self.p4rt = self._call(connect(), 40)

    def counter(self, name: str) -> dict[int, tuple[int, int]]:
        assert self.p4rt is not None, "configure() first"
        return self._call(self.p4rt.read_counter(name), 10)

    def registers(self) -> dict[str, list[int]]:
        """Every register's every cell, read over the Thrift runtime inside the namespace."""
        assert self.p4rt is not None, "configure() first"
        names = [r.name for r in self.p4rt.switch.p4info.registers]

        def read() -> dict[str, list[int]]:
            with ThriftClient(self.config.thrift_port or 9090) as client:
                return {name: client.register_read_all(name) for name in names}

        return netns.call_in(self.ns, read)

    def tables(self) -> dict[str, Any]:
        """Every table entry and multicast group, read back over P4Runtime."""
        assert self.p4rt is not None, "configure() first"
        return self._call(self.p4rt.read_all(), 20)

    def rx_packets(self) -> int:
        return sum(packets for packets, _ in self.counter(names.RX_COUNTER).values())

    def drops(self) -> Counter[int]:
        total: Counter[int] = Counter()
        for name in (names.DROP_COUNTER, names.EGRESS_DROP_COUNTER):
            for index, (packets, _) in self.counter(name).items():
                if packets:
                    total[index] += packets
        return total

    # -- traffic ---------------------------------------------------------------------------

    def _fence_frame(self, in_port: int, target_port: int, fence_id: int) -> bytes:
        assert self.state is not None
        target = next((n for n, p in self.state.routes.items() if p == target_port), None)
        if target is None:
            raise LabError(f"no route leads to port {target_port}: cannot fence it")
        role, node = self.state.ports.get(in_port, (PortRole.HOST, 0))
        src = node if role == PortRole.HOST else wire.MGMT_NODE_ID
        hdr = wire.Header(
            op=wire.Op.UNICAST, src_node=src, dst_node=target, tag=FENCE_TAG, seq=fence_id
        )
        return wire.build_frame(hdr)

    def send(self, port: int, frame: bytes) -> dict[int, list[bytes]]:
        """Inject ``frame`` on ``port``; every frame the switch sent because of it, by port."""
        fence_id = next(self._fence_ids)
        self.sockets[port].send(frame)
        for target in self.ports:
            self.sockets[port].send(self._fence_frame(port, target, fence_id))
        self.frames_sent += 1 + len(self.ports)
        outputs: dict[int, list[bytes]] = {p: [] for p in self.ports}
        fenced: set[int] = set()
        deadline = time.monotonic() + self.answer_timeout
        while len(fenced) < len(self.ports):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                alive = "alive" if self.alive() else "dead"
                raise LabError(
                    f"switch ({alive}) did not pass the fence to ports "
                    f"{sorted(set(self.ports) - fenced)} within {self.answer_timeout} s"
                )
            readable, _, _ = select.select(list(self.sockets.values()), [], [], remaining)
            for sock in readable:
                out_port = next(p for p, s in self.sockets.items() if s is sock)
                while True:
                    try:
                        data = sock.recv(65536)
                    except BlockingIOError:
                        break
                    if self._is_fence(data, fence_id):
                        fenced.add(out_port)
                    elif not self._is_fence(data, None):
                        outputs[out_port].append(data)
        return outputs

    @staticmethod
    def _is_fence(data: bytes, fence_id: int | None) -> bool:
        try:
            hdr = wire.parse_frame(data, check_crc=False).hdr
        except wire.WireError:
            return False
        return (
            hdr.tag == FENCE_TAG
            and hdr.op == wire.Op.UNICAST
            and (fence_id is None or hdr.seq == fence_id)
        )
