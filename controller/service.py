"""The communicator service: host agents ask the control plane for communicators here.

JSON lines over a unix socket (unix sockets cross network namespaces, so agents on Mininet
hosts reach the controller without any IP plumbing). Requests carry an ``id`` and an ``op``;
every answer repeats the id with ``ok`` and either the result or an ``error`` text:

  create        {members: [node...], roots?: [node...], membership?: "p4runtime"|"mp"}
                -> {comm_id, install_seconds}
  split         {comm_id, node, color, key} -> {comm_id, members} or {comm_id: null}
  free          {comm_id, node} -> {removed: bool}
  ensure_trees  {comm_id, root} -> {install_seconds}
  rendezvous    {name, node, expected} -> {} once ``expected`` nodes joined ``name``
  status        {} -> {communicators: {id: members}, restarts}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from controller.desired_state import Membership
from controller.runtime import ControlPlane

LOG = logging.getLogger(__name__)
MAX_LINE = 1 << 20


class CommService:
    def __init__(self, control: ControlPlane, path: Path) -> None:
        self.control = control
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._rendezvous: dict[str, tuple[set[int], asyncio.Event]] = {}
        self.requests = 0

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(
            self._client, path=str(self.path), limit=MAX_LINE
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.path.unlink(missing_ok=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        write_lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()
        try:
            while line := await reader.readline():
                task = asyncio.create_task(self._answer(line, writer, write_lock))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
            LOG.warning("communicator service: client dropped: %s", exc)
        finally:
            for task in tasks:
                task.cancel()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter, lock: asyncio.Lock) -> None:
        self.requests += 1
        ident: Any = None
        try:
            request = json.loads(line)
            ident = request.get("id")
            result = await self.handle(request)
            reply = {"id": ident, "ok": True, **result}
        except Exception as exc:
            reply = {"id": ident, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        async with lock:
            writer.write(json.dumps(reply).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        control = self.control
        if op == "create":
            membership = request.get("membership")
            report = await control.create(
                [int(n) for n in request["members"]],
                roots=tuple(request["roots"]) if request.get("roots") is not None else None,
                membership=Membership(membership) if membership else None,
            )
            return {"comm_id": report.comm_id, "install_seconds": report.seconds}
        if op == "split":
            answer = await control.split(
                int(request["comm_id"]),
                int(request["node"]),
                int(request["color"]),
                int(request["key"]),
            )
            if answer is None:
                return {"comm_id": None}
            return {"comm_id": answer[0], "members": list(answer[1])}
        if op == "free":
            return {"removed": await control.free(int(request["comm_id"]), int(request["node"]))}
        if op == "ensure_trees":
            report = await control.ensure_trees(int(request["comm_id"]), int(request["root"]))
            return {"install_seconds": report.seconds}
        if op == "rendezvous":
            return await self._join(
                str(request["name"]), int(request["node"]), int(request["expected"])
            )
        if op == "status":
            return {
                "communicators": {str(k): list(v.members) for k, v in control.comms.items()},
                "restarts": control.restarts,
            }
        raise ValueError(f"unknown op {op!r}")

    async def _join(self, name: str, node: int, expected: int) -> dict[str, Any]:
        joined, event = self._rendezvous.setdefault(name, (set(), asyncio.Event()))
        joined.add(node)
        if len(joined) >= expected:
            event.set()
        await event.wait()
        return {"joined": len(joined)}
