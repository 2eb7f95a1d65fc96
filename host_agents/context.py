"""What a collective algorithm sees: one instance of a collective on one rank.

Algorithms (``host_agents/algorithms/``) import this module and nothing else of the agent: the
context gives them ranks, point-to-point messages, multicast along the switches' trees, the
switch barrier, bounded waits and the rank's place in the dragonfly. The host agent implements
it over its engine (:class:`host_agents.engine_context.EngineContext`, on Mininet and on the fabric
alike); a simulator can implement it over simulated transport and time.

Every rank argument is a rank of the communicator, never a node id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from controller.wire import Tree

if TYPE_CHECKING:
    from controller.topology import Topology
    from host_agents.transport.messages import Incoming, Source

__all__ = ["CollectiveContext", "Data", "RepairPacing", "Tree"]

T = TypeVar("T")
Data = bytes | bytearray | memoryview


class RepairPacing(Protocol):
    @property
    def silent_since(self) -> float:
        """When something last arrived."""
        ...

    def timeout(self, now: float) -> float:
        """How long to wait for arrivals before the next :meth:`tick`."""
        ...

    def arrived(self, now: float) -> None: ...
    def tick(self, pending: Mapping[int, Incoming], now: float) -> None:
        """Ask some of the ranks ``pending`` names (rank -> its published multicast as it
        arrives here) for what is missing, where a silence or an overdue answer says so."""
        ...


class CollectiveContext(Protocol):
    step: str  # what the algorithm is doing now; errors name it

    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    def node(self, rank: int) -> int: ...
    def error(self, detail: str) -> Exception:
        """An error naming the rank, the collective, the instance and the step."""
        ...

    # -- point to point: reliable messages named by (peer, tag) within this instance ----------

    def isend(self, dst: int, tag: int, data: Data | Source) -> asyncio.Future[None]: ...
    async def send(self, dst: int, tag: int, data: Data | Source) -> None: ...
    def irecv(self, src: int, tag: int, size: int) -> Incoming: ...
    async def recv(self, src: int, tag: int, size: int) -> bytearray: ...
    async def wait_incoming(self, msg: Incoming, what: str) -> bytearray:
        """Wait for a message (bounded), hand its data over and forget it."""
        ...

    def ask_resend(self, msg: Incoming) -> None:
        """Ask for ``msg`` now instead of after its sender's retransmission timeout: other
        messages of this step arrived, this one is overdue. From :meth:`irecv`, its sender
        resends it; from :meth:`multicast_incoming`, a co-root asks the root for what it
        lacks (a member asks nothing: its co-root repairs it unasked)."""
        ...

    def consume(self, msg: Incoming) -> None:
        """The algorithm has taken a completed message's data."""
        ...

    async def wait(
        self, fut: Awaitable[T], what: str, *, progress: Callable[[], int] | None = None
    ) -> T:
        """Await ``fut``, bounded by the communicator's timeouts."""
        ...

    async def wait_all(self, futures: list[asyncio.Future[Any]], what: str) -> None: ...

    # -- multicast along the switches' trees ---------------------------------------------------

    @property
    def segment_size(self) -> int: ...
    def multicast(self, tree: int, data: Data | Source) -> asyncio.Future[None]:
        """This rank multicasts a copy of ``data`` along its ``tree``: done when every segment
        went out once, so the caller may reuse its buffer; the acknowledgements and any
        repairs go on in the background (the communicator's ``settle`` waits for them). With
        switch-merged ACKs, done when every receiver has it all."""
        ...

    def multicast_incoming(self, root: int, tree: int, size: int) -> Incoming:
        """The multicast of rank ``root`` along its ``tree``, as it arrives here."""
        ...

    def publish(self, tree: int, data: Data) -> object:
        """Multicast without acknowledgements; receivers ask for what they miss
        (:meth:`ask_missing`). The data stays for repairs until :meth:`withdraw`."""
        ...

    def withdraw(self, published: object) -> None: ...
    def withdraw_after_barrier(self, published: object) -> None:
        """Keep ``published`` for repairs until a switch barrier (every rank calls this at
        the same point) says every rank has what it needed, without waiting for it here:
        the collective returns once this rank's data is complete."""
        ...

    def repair_pacer(self, window: int) -> RepairPacing:
        """When and whom to ask for repairs while waiting for the published multicasts of
        many ranks; ``window``: how many may have published before the next one's data is
        here (host_agents/transport/publish.py)."""
        ...

    @property
    def progress_timeout(self) -> float: ...
    @property
    def resend_ask_delay(self) -> float:
        """How long arrivals may pause before overdue messages are asked for (ask_resend)."""
        ...

    def now(self) -> float: ...

    # -- the switch barrier -------------------------------------------------------------------

    async def arrive(self) -> None:
        """Arrive at this instance's switch barrier and wait for the switches' release."""
        ...

    async def aggregate(self, data: bytes | bytearray, op: int) -> bytes:
        """Every rank's int32 lanes combined by the switches along the barrier tree (``op``:
        a host_agents.reduction.ReduceOp); every rank gets the result."""
        ...

    # -- placement in the dragonfly -------------------------------------------------------------

    def group_of(self, rank: int) -> int: ...
    def switch_of(self, rank: int) -> int: ...
    @property
    def topology(self) -> Topology | None: ...
    def relays(self, root: int) -> tuple[int, ...]:
        """Ragasa's relays for ``root``: one rank per other dragonfly group, chosen exactly as
        the switches' spread tree was built."""
        ...
