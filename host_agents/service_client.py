"""The host agent's side of the communicator service (controller/service.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any


class ServiceError(RuntimeError):
    pass


class ServiceClient:
    def __init__(self, path: Path, *, timeout: float = 120.0) -> None:
        self.path = path
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader_task: asyncio.Task[None] | None = None
        self._connect_lock = asyncio.Lock()

    async def _connect(self) -> None:
        async with self._connect_lock:
            if self._writer is not None:
                return
            try:
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(str(self.path), limit=1 << 20), 10
                )
            except (OSError, TimeoutError) as exc:
                raise ServiceError(
                    f"cannot reach the communicator service at {self.path}: {exc}"
                ) from exc
            self._reader_task = asyncio.create_task(self._read_replies())

    async def _read_replies(self) -> None:
        assert self._reader is not None
        try:
            while line := await self._reader.readline():
                reply = json.loads(line)
                fut = self._pending.pop(reply.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(reply)
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(
                        ServiceError("the communicator service closed the connection")
                    )
            self._pending.clear()

    async def call(self, op: str, timeout: float | None = None, **params: Any) -> dict[str, Any]:
        await self._connect()
        assert self._writer is not None
        ident = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = fut
        self._writer.write(json.dumps({"id": ident, "op": op, **params}).encode() + b"\n")
        await self._writer.drain()
        try:
            reply = await asyncio.wait_for(fut, timeout or self.timeout)
        except TimeoutError:
            self._pending.pop(ident, None)
            raise ServiceError(
                f"communicator service: no answer to {op} within {timeout or self.timeout:.0f} s"
            ) from None
        if not reply.get("ok"):
            raise ServiceError(f"communicator service refused {op}: {reply.get('error')}")
        return reply

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reader_task is not None:
            self._reader_task.cancel()

    # -- the CommService protocol of host_agents.comm ------------------------------------------

    async def create(self, members: tuple[int, ...]) -> tuple[int, bool]:
        reply = await self.call("create", members=list(members))
        return int(reply["comm_id"]), True

    async def split(
        self, comm_id: int, node: int, color: int, key: int
    ) -> tuple[int, tuple[int, ...], bool] | None:
        reply = await self.call("split", comm_id=comm_id, node=node, color=color, key=key)
        if reply.get("comm_id") is None:
            return None
        return int(reply["comm_id"]), tuple(int(m) for m in reply["members"]), True

    async def free(self, comm_id: int, node: int) -> None:
        await self.call("free", comm_id=comm_id, node=node)

    async def ensure_trees(self, comm_id: int, root: int) -> float:
        reply = await self.call("ensure_trees", comm_id=comm_id, root=root)
        return float(reply["install_seconds"])

    async def rendezvous(
        self,
        name: str,
        node: int,
        members: tuple[int, ...],
        timeout: float,
        comm_id: int | None = None,
    ) -> int | None:
        """Wait until every one of ``members`` joined ``name``; with ``comm_id`` (whose
        members they are), returns the barrier epoch the switches released for it (None
        without)."""
        reply = await self.call(
            "rendezvous",
            timeout=timeout,
            name=name,
            node=node,
            members=list(members),
            comm_id=comm_id,
        )
        epoch = reply.get("barrier_epoch")
        return None if epoch is None else int(epoch)
