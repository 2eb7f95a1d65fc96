"""The communicator service: host agents ask the control plane for communicators here.

JSON lines over a unix socket (unix sockets cross network namespaces, so agents on Mininet
hosts reach the controller without any IP plumbing). Requests carry an ``id`` and an ``op``;
every answer repeats the id with ``ok`` and either the result or an ``error`` text:

  create        {members: [node...], roots?: [node...], membership?: "p4runtime"|"mp"}
                -> {comm_id, install_seconds}
  split         {comm_id, node, color, key} -> {comm_id, members} or {comm_id: null}
  free          {comm_id, node} -> {removed: bool}
  ensure_trees  {comm_id, root} -> {install_seconds}
  rendezvous    {name, node, expected, comm_id?} -> {joined, barrier_epoch?} once ``expected``
                nodes joined ``name``; with comm_id, the epoch its barrier switches released
                (a new job on an existing communicator resumes its barriers from there)
  status        {} -> {communicators: {id: members}, restarts}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.desired_state import Membership
from controller.runtime import ControlPlane

LOG = logging.getLogger(__name__)
MAX_LINE = 1 << 20


@dataclass
class _Rendezvous:
    expected: int
    joined: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    answer: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    answered: int = 0


class CommService:
    def __init__(self, control: ControlPlane, path: Path) -> None:
        self.control = control
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._rendezvous: dict[str, _Rendezvous] = {}
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
            comm_id = request.get("comm_id")
            return await self._join(
                str(request["name"]),
                int(request["node"]),
                int(request["expected"]),
                None if comm_id is None else int(comm_id),
            )
        if op == "status":
            return {
                "communicators": {str(k): list(v.members) for k, v in control.comms.items()},
                "restarts": control.restarts,
            }
        raise ValueError(f"unknown op {op!r}")

    async def _join(
        self, name: str, node: int, expected: int, comm_id: int | None
    ) -> dict[str, Any]:
        meeting = self._rendezvous.setdefault(name, _Rendezvous(expected))
        meeting.joined.add(node)
        if len(meeting.joined) >= expected and not meeting.done.is_set():
            answer: dict[str, Any] = {"joined": len(meeting.joined)}
            try:
                if comm_id is not None:
                    answer["barrier_epoch"] = await self.control.released_barrier_epoch(comm_id)
                meeting.answer = answer
            except Exception as exc:
                meeting.error = f"rendezvous {name!r}: {exc}"
            meeting.done.set()
        await meeting.done.wait()
        meeting.answered += 1
        if meeting.answered >= meeting.expected:
            self._rendezvous.pop(name, None)
        if meeting.error is not None:
            raise RuntimeError(meeting.error)
        return meeting.answer
