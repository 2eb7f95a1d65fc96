"""The root's digest of a multicast's content, so a member can tell a co-root's substitute.

A member that lost some of the root's segments takes them from its co-root's repairs; a
hostile co-root could repair with bytes the root never sent (issue 32, Medium 8). The root
therefore puts a digest of the whole message (BLAKE2s, 32 bits, never 0) in the ``seq`` field
of every data frame it sends once its source is complete (a relay's from its last segment on);
a member that placed any segment from someone other than the root checks the finished message
against the digest it got from the root, and fails the message on a mismatch instead of
returning bytes the root never sent. A member that got no frame with the root's digest cannot
check. 32 bits: a co-root must search about 2^32
candidate forgeries of one message to pass, per message and within the broadcast's lifetime.
"""

from __future__ import annotations

import hashlib

from host_agents.transport.config import EngineError

NO_DIGEST = 0


def digest_of(data: bytes | bytearray | memoryview) -> int:
    value = int.from_bytes(hashlib.blake2s(data, digest_size=4).digest(), "big")
    return value or 1


class CorruptCopy(EngineError):
    """A message whose co-root repairs do not match the root's digest."""
