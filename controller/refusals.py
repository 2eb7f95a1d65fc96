"""The communicator service's refusal: the caller may not do what it asked."""

from __future__ import annotations

from controller.runtime import CommunicatorError


class Refused(CommunicatorError):
    """The caller may not do what it asked."""
