"""Which collective epochs of each communicator this rank has started and not finished: what
decides whether data nobody has asked for yet (early data) is kept or refused."""

from __future__ import annotations

from controller import wire
from host_agents.transport.config import EngineConfig


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

    def accepts_early(self, comm: int, epoch: int) -> bool:
        """Every unfinished collective, however many are open ([Ragasa]'s all-roots
        experiment starts 72 at once, and data of the oldest arrives before its receive is
        posted), and any within ``epochs_ahead`` of the newest started."""
        if epoch in self._open.get(comm, ()):
            return True
        ahead = wire.serial_diff(epoch, self._newest.get(comm, 0))
        return -self.cfg.epochs_ahead <= ahead <= self.cfg.epochs_ahead
