"""The communicator service: host agents ask the control plane for communicators here.

JSON lines over a unix socket (unix sockets cross network namespaces, so agents on Mininet
hosts reach the controller without any IP plumbing). Requests carry an ``id`` and an ``op``;
every answer repeats the id with ``ok`` and either the result or an ``error`` text:

  create        {members: [node...], roots?: [node...], membership?: "p4runtime"|"mp"}
                -> {comm_id, install_seconds}
  split         {comm_id, node, color, key} -> {comm_id, members} or {comm_id: null}
  free          {comm_id, node} -> {removed: bool}
  ensure_trees  {comm_id, root} -> {install_seconds}
  rendezvous    {name, node, members | comm_id, expected?} -> {joined, barrier_epoch?} once
                every member joined ``name`` (the communicator's members with comm_id);
                with comm_id, the epoch its barrier switches released (a new job on an
                existing communicator resumes its barriers from there)
  status        {} -> {communicators: {id: members}, restarts}

The caller is who the connection says (:mod:`controller.callers`): a host's node id, or the
operator. A ``node`` in a request body must be the caller's own (the operator may name any).
Only members may free, split or ask for trees of a communicator, and a host may only create
communicators it belongs to; one with other members only once every member asked for it
(:mod:`controller.consent`). Each host is charged for every communicator it created, consented
to or got from a split, at most ``comms_per_caller`` at once; a create or split still being
installed counts too (its places are reserved when it is admitted, become its charge once it is
installed and are given back if it is not), so concurrent requests cannot overrun the bound.
Rendezvous are defined by their members and bounded per node (:mod:`controller.rendezvous`).
Each connection has at most ``in_flight`` requests open, each request line is bounded, and
every request is validated before any state changes (``controller.runtime``). Switch state is
computed off the event loop (``controller.changes``): while one request's change is computed,
the others are answered.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from controller.callers import OPERATOR, Caller, CallerOf, NetnsCallers, peer_pid
from controller.communicators import Communicators
from controller.consent import Consents
from controller.desired_state import Membership
from controller.refusals import Refused
from controller.rendezvous import Meetings
from controller.runtime import CommunicatorError, ControlPlane, Installed

LOG = logging.getLogger(__name__)
MAX_LINE = 1 << 20
MAX_NAME = 200  # characters of a rendezvous name

__all__ = ["CommService", "Refused"]


class CommService:
    def __init__(
        self,
        control: ControlPlane,
        path: Path,
        *,
        callers: CallerOf | None = None,
        comms_per_caller: int = 16,
        in_flight: int = 32,
    ) -> None:
        self.control = control
        self.communicators = Communicators(control)
        self.path = path
        self.callers = callers or NetnsCallers()
        self.comms_per_caller = comms_per_caller
        self.in_flight = in_flight
        self._server: asyncio.AbstractServer | None = None
        self.meetings = Meetings(control.released_barrier_epoch)
        self.consents = Consents()
        # communicator -> the hosts charged for it (its creator, consenting members, a
        # split's parts' members)
        self._charged: dict[int, frozenset[int]] = {}
        # node -> places it holds in creates and splits admitted but not yet settled
        self._reserved: collections.Counter[int] = collections.Counter()
        self._open: collections.Counter[Caller] = collections.Counter()  # requests in flight
        self.requests = 0
        self.refused = 0

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(
            self._client, path=str(self.path), limit=MAX_LINE
        )
        # unprivileged agents (host_agents/privileges.py) connect too: who they are comes from
        # the connection (controller/callers.py), not from the socket's permissions
        self.path.chmod(0o666)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.path.unlink(missing_ok=True)

    def _caller(self, writer: asyncio.StreamWriter) -> Caller | None:
        sock = writer.get_extra_info("socket")
        if sock is None:
            return None
        try:
            return self.callers(peer_pid(sock))
        except OSError:
            return None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        write_lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()
        caller = self._caller(writer)
        if caller is None:
            self.refused += 1
            LOG.warning("communicator service: refused a connection from an unknown namespace")
            reply = {"id": None, "ok": False, "error": "Refused: unknown caller"}
            writer.write(json.dumps(reply).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        try:
            while line := await reader.readline():
                if not caller.is_operator and self._open[caller] >= self.in_flight:
                    await self._reply(
                        writer,
                        write_lock,
                        {"id": None, "ok": False, "error": "Refused: too many open requests"},
                    )
                    self.refused += 1
                    continue
                task = asyncio.create_task(self._answer(line, writer, write_lock, caller))
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

    async def _answer(
        self, line: bytes, writer: asyncio.StreamWriter, lock: asyncio.Lock, caller: Caller
    ) -> None:
        self.requests += 1
        self._open[caller] += 1
        ident: Any = None
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
            ident = request.get("id")
            result = await self.handle(request, caller)
            reply = {"id": ident, "ok": True, **result}
        except Refused as exc:
            self.refused += 1
            LOG.warning("communicator service: refused %s: %s", caller, exc)
            reply = {"id": ident, "ok": False, "error": f"Refused: {exc}"}
        except Exception as exc:
            reply = {"id": ident, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            self._open[caller] -= 1
        await self._reply(writer, lock, reply)

    @staticmethod
    async def _reply(
        writer: asyncio.StreamWriter, lock: asyncio.Lock, reply: dict[str, Any]
    ) -> None:
        async with lock:
            writer.write(json.dumps(reply).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    # -- who may do what --------------------------------------------------------------------

    @staticmethod
    def _node(request: dict[str, Any], caller: Caller) -> int:
        """The node a request acts for: the caller's own; the operator names one."""
        named = request.get("node")
        if caller.node is None:
            if named is None:
                raise ValueError("the operator must name the node it acts for")
            return int(named)
        if named is not None and int(named) != caller.node:
            raise Refused(f"{caller} cannot act for node {int(named)}")
        return caller.node

    def _member(self, comm_id: int, caller: Caller, what: str) -> None:
        comm = self.control.comms.get(comm_id)
        if comm is None:
            raise CommunicatorError(f"unknown communicator {comm_id}")
        if caller.node is not None and caller.node not in comm.members:
            raise Refused(f"{caller} is not a member of communicator {comm_id}: cannot {what}")

    def _may_create(self, members: list[int], caller: Caller) -> None:
        if caller.node is None:
            return
        if caller.node not in members:
            raise Refused(f"{caller} may only create communicators it is a member of")
        self._may_charge([caller.node])

    def charged_to(self, node: int) -> int:
        """Live communicators ``node`` is charged for."""
        return sum(
            1
            for comm_id, nodes in self._charged.items()
            if node in nodes and comm_id in self.control.comms
        )

    def _may_charge(self, nodes: list[int]) -> None:
        for node, more in collections.Counter(nodes).items():
            live, pending = self.charged_to(node), self._reserved[node]
            if live + pending + more > self.comms_per_caller:
                being = f" and {pending} being installed" if pending else ""
                raise Refused(
                    f"node {node} already has {live} communicators it created or split{being} "
                    f"(at most {self.comms_per_caller} at once); free some first"
                )

    def _reserve(self, parts: list[tuple[int, ...]]) -> Installed:
        """Admit communicators of ``parts`` against every member's bound and reserve a place
        for each, at once (nothing awaits between the check and the reservation, so concurrent
        requests see each other's). What it returns, given to the create, turns the places
        into charges once the parts are installed, or gives them back when they are not
        (failed, refused by a switch, withdrawn). The caller hands it to the create with no
        await in between: the change queue then tells it exactly once, even if the caller
        leaves while the change is computed."""
        nodes = [m for part in parts for m in part]
        self._may_charge(nodes)
        self._reserved.update(nodes)
        pending = True

        def settled(comm_ids: list[int] | None) -> None:
            nonlocal pending
            if not pending:
                return
            pending = False
            self._reserved.subtract(nodes)
            self._reserved = +self._reserved  # drops the nodes that hold none
            if comm_ids is not None:
                for comm_id, part in zip(comm_ids, parts, strict=True):
                    self._charge(comm_id, part)

        return settled

    def _charge(self, comm_id: int, nodes: tuple[int, ...]) -> None:
        self._charged = {k: v for k, v in self._charged.items() if k in self.control.comms}
        self._charged[comm_id] = frozenset(nodes)

    async def _create(self, request: dict[str, Any], caller: Caller) -> dict[str, Any]:
        members = [int(n) for n in request["members"]]
        self._may_create(members, caller)
        membership = request.get("membership")
        roots = (
            tuple(int(r) for r in request["roots"]) if request.get("roots") is not None else None
        )

        async def install() -> dict[str, Any]:
            # charged to every member (the operator is not bounded)
            settled = None if caller.node is None else self._reserve([tuple(members)])
            report = await self.control.create(
                members,
                roots=roots,
                membership=Membership(membership) if membership else None,
                settled=settled,
            )
            return {"comm_id": report.comm_id, "install_seconds": report.seconds}

        if caller.node is None or set(members) == {caller.node}:
            return await install()
        # other hosts in it: installed once every member asked for the same communicator
        key = (tuple(members), roots, membership)
        return dict(await self.consents.agree(key, caller.node, frozenset(members), install))

    async def handle(self, request: dict[str, Any], caller: Caller = OPERATOR) -> dict[str, Any]:
        op = request.get("op")
        control = self.control
        if op == "create":
            return await self._create(request, caller)
        if op == "split":
            comm_id = int(request["comm_id"])
            node = self._node(request, caller)
            self._member(comm_id, caller, "split it")
            answer = await self.communicators.split(
                comm_id,
                node,
                int(request["color"]),
                int(request["key"]),
                admit=self._admit_split,
            )
            if answer is None:
                return {"comm_id": None}
            return {"comm_id": answer[0], "members": list(answer[1])}
        if op == "free":
            comm_id = int(request["comm_id"])
            self._member(comm_id, caller, "free it")
            if caller.node is None and request.get("node") is None:  # the operator: at once
                await control.free(comm_id)
                self.communicators.forget(comm_id)
                removed = True
            else:
                removed = await self.communicators.free(comm_id, self._node(request, caller))
            if removed:
                self._charged.pop(comm_id, None)
            return {"removed": removed}
        if op == "ensure_trees":
            comm_id = int(request["comm_id"])
            self._member(comm_id, caller, "install trees in it")
            report = await control.ensure_trees(comm_id, int(request["root"]))
            return {"install_seconds": report.seconds}
        if op == "rendezvous":
            return await self._rendezvous(request, caller)
        if op == "status":
            return {
                "communicators": {str(k): list(v.members) for k, v in control.comms.items()},
                "restarts": control.restarts,
            }
        raise ValueError(f"unknown op {op!r}")

    def _admit_split(self, parts: list[tuple[int, ...]]) -> Installed:
        """A split's parts are charged to their members (each called split: consent)."""
        return self._reserve(parts)

    async def _rendezvous(self, request: dict[str, Any], caller: Caller) -> dict[str, Any]:
        on = request.get("comm_id")
        meet_on = None if on is None else int(on)
        name = str(request["name"])
        if len(name) > MAX_NAME:
            raise ValueError(f"rendezvous: a name of at most {MAX_NAME} characters")
        if meet_on is not None:
            self._member(meet_on, caller, "meet on it")
            members = frozenset(self.control.comms[meet_on].members)
            if (
                request.get("members") is not None
                and {int(m) for m in request["members"]} != members
            ):
                raise ValueError(f"rendezvous: members are not communicator {meet_on}'s")
        elif request.get("members") is not None:
            members = frozenset(int(m) for m in request["members"])
        else:
            raise ValueError("rendezvous: name the members or the communicator that meets")
        hosts = {h.node_id for h in self.control.topo.hosts}
        if not members or not members <= hosts:
            raise ValueError("rendezvous: members must be hosts of the topology")
        expected = request.get("expected")
        if expected is not None and int(expected) != len(members):
            raise ValueError(f"rendezvous: {int(expected)} expected, {len(members)} members")
        return await self.meetings.join(name, self._node(request, caller), members, meet_on)
