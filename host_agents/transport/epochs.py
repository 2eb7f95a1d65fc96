"""Which collective epochs of each communicator this rank has started and not finished: what
decides whether data nobody has asked for yet (early data) is kept or refused."""

from __future__ import annotations

from controller import wire
from host_agents.transport.config import EngineConfig

# the widest early window: a quarter of the 16-bit epoch space, so an epoch ahead and one
# behind are never confused (serial arithmetic)
EPOCH_WINDOW_MAX = 1 << 14


class Epochs:
    def __init__(self, cfg: EngineConfig) -> None:
        self.cfg = cfg
        self._newest: dict[int, int] = {}  # comm -> newest epoch this rank started
        self._open: dict[int, set[int]] = {}  # comm -> epochs started and not finished

    def forget(self, comm: int) -> None:
        self._newest.pop(comm, None)
        self._open.pop(comm, None)

    def started(self, comm: int, epoch: int) -> None:
        if wire.serial_lt(self._newest.get(comm, 0), epoch):
            self._newest[comm] = epoch
        self._open.setdefault(comm, set()).add(epoch)

    def finished(self, comm: int, epoch: int) -> None:
        self._open.get(comm, set()).discard(epoch)

    def accepts_early(self, comm: int, epoch: int, members: int) -> bool:
        """Every unfinished collective, however many are open ([Ragasa]'s all-roots
        experiment starts 72 at once, and data of the oldest arrives before its receive is
        posted), and any within the window of the newest started: ``epochs_ahead``, or two
        operations of every member rooting one if that is more. A rank that has not started
        an all-roots operation yet gets its last roots' data 72 epochs ahead: refused, the
        data was never acknowledged and its roots' stretched timeouts stalled [Ragasa]'s 1 B
        cell for minutes on the dilated links (make reproduce --dilation 100000)."""
        if epoch in self._open.get(comm, ()):
            return True
        window = min(max(self.cfg.epochs_ahead, 2 * members), EPOCH_WINDOW_MAX)
        ahead = wire.serial_diff(epoch, self._newest.get(comm, 0))
        return -window <= ahead <= window
