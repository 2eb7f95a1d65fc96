"""What a RESULT from the root says about the chunk the root completed before it.

The root of a communicator's reduction tree names, in the ``seq`` of each RESULT it sends
down, the chunk it completed just before (its slot tag: the instance's epoch ++ the chunk's
16-bit number; 0 names nothing), and the switches below pass the name on; a switch answering a
resend from its slot sends 0 (common/reduce.p4). Every member gets every RESULT the root
sends, in order on its one path down, so a host that gets one whose predecessor it lacks lost
that predecessor below the root, alone or with the subtree under the lost copy, and a switch
on its path holds it. A chunk that no RESULT names yet (every host lacks it: a contribution was
lost, or the root's own RESULT) is not what this tells, which keeps the 72 ranks of one lost
REDUCE waiting for the resend order instead of each asking.
"""

from __future__ import annotations

TAG_CHUNK_BITS = 16
TAG_CHUNK_MASK = (1 << TAG_CHUNK_BITS) - 1


def named_before(seq: int) -> tuple[int, int] | None:
    """The (epoch, chunk number) a RESULT's ``seq`` names, or None when it names nothing."""
    if seq == 0:
        return None
    return seq >> TAG_CHUNK_BITS, seq & TAG_CHUNK_MASK
