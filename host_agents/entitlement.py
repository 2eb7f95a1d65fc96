"""Who may send which frame to this host: one rule per frame kind, in one place.

The switches already guarantee two things (``docs/protocol.md``, threat model): a frame's
``src_node`` is the node of the host port it entered by (SRC_SPOOF), and a multicast copy only
travels its tree from the tree's parent port (RPF). So ``src_node`` can be trusted as the
sender's identity, and what is left for the agent is to check that this sender holds the role
the frame claims, for that (communicator, root, tree):

=====================  ================================================================
frame                  entitled sender
=====================  ================================================================
unicast data           a member of the communicator
multicast data         the multicast's root itself, a member (relays root their own trees)
repair (unicast)       the multicast's root, or (acknowledged multicasts) the co-root this
                       node reports to, which repairs its group from its own copy
multicast ACK / NACK   a node whose plan reports to this node: a co-root or direct receiver
                       at the root, a group member at a co-root, any receiver at the root of
                       a published (unacknowledged) multicast
switch-merged ACK      the root's own switch, for a plan with switch-merged ACKs, to the root
unicast ACK            the peer the message is being sent to (the sender's lookup by
                       (peer, comm, epoch, tag) in transport/unicast.py already enforces it)
RELEASE, RESULT        this host's own switch
=====================  ================================================================

Everything else is dropped and counted under a :class:`Refusal` reason, on every path (fresh,
early, repair, ACK, NACK), so an attack shows in the agent's statistics.
"""

from __future__ import annotations

import enum

from controller import wire
from host_agents.directory import Directory
from host_agents.plans import PlanFunc


class Refusal(enum.StrEnum):
    UNKNOWN_COMM = "unknown communicator"
    NOT_MEMBER = "sender is not a member of the communicator"
    ROOT_NOT_MEMBER = "multicast root is not a member of the communicator"
    NOT_ROOT = "multicast data not sent by its root"
    NOT_RECEIVER = "this node is not a receiver of that tree"
    NOT_REPORTER = "ACK or NACK from a node that does not report to this node"
    NOT_MY_SWITCH = "RELEASE, RESULT or merged ACK not sent by this host's switch"
    NOT_MERGED = "merged ACK for a multicast this node roots without switch-merged ACKs"
    NOT_AGGREGATED = "NACK on behalf of a node the sender does not aggregate"


class Entitlement:
    """The rules above for one host. ``members`` reads the communicators this host is in."""

    def __init__(self, node: int, directory: Directory, plan: PlanFunc | None) -> None:
        self.node = node
        self.directory = directory
        self.plan = plan

    def _members(self, comm: int) -> tuple[int, ...] | None:
        return self.directory.comms.get(comm)

    def unicast_data(self, hdr: wire.Header) -> Refusal | None:
        members = self._members(hdr.comm_id)
        if members is None:
            return Refusal.UNKNOWN_COMM
        if hdr.src_node not in members:
            return Refusal.NOT_MEMBER
        return None

    def multicast_data(self, hdr: wire.Header) -> Refusal | None:
        """A multicast segment, as sent along the tree or as a unicast repair."""
        members = self._members(hdr.comm_id)
        if members is None:
            return Refusal.UNKNOWN_COMM
        if hdr.root_node not in members:
            return Refusal.ROOT_NOT_MEMBER
        if hdr.flags & wire.Flag.NO_ACK:
            if hdr.src_node != hdr.root_node:
                return Refusal.NOT_ROOT
            return None if self.node in members else Refusal.NOT_RECEIVER
        if self.plan is None:
            return Refusal.NOT_RECEIVER
        target = self.plan(hdr.comm_id, hdr.root_node, hdr.tree).ack_target.get(self.node)
        if target is None:
            return Refusal.NOT_RECEIVER
        if hdr.src_node == hdr.root_node:
            return None
        by_coroot = hdr.op == wire.Op.UNICAST and hdr.flags & wire.Flag.REPAIR
        return None if by_coroot and hdr.src_node == target else Refusal.NOT_ROOT

    def reporters(self, comm: int, root: int, tree: int, *, published: bool) -> frozenset[int]:
        """Nodes whose ACKs and NACKs of the multicast (comm, root, tree) this node takes."""
        members = self._members(comm)
        if members is None or root not in members:
            return frozenset()
        if published:  # only the root holds published data; every other member may ask
            return frozenset(members) - {root} if root == self.node else frozenset()
        if self.plan is None:
            return frozenset()
        plan = self.plan(comm, root, tree)
        allowed = set(plan.aggregates.get(self.node, ()))
        if root == self.node:
            allowed.update(plan.root_sources)
        allowed.discard(self.node)
        return frozenset(allowed)

    def feedback(self, hdr: wire.Header, *, published: bool = False) -> Refusal | None:
        """A multicast ACK or NACK (``published``: a NACK to the root of a published one)."""
        if self._members(hdr.comm_id) is None:
            return Refusal.UNKNOWN_COMM
        reporters = self.reporters(hdr.comm_id, hdr.root_node, hdr.tree, published=published)
        return None if hdr.src_node in reporters else Refusal.NOT_REPORTER

    def merged_ack(self, hdr: wire.Header) -> Refusal | None:
        """A switch-merged ACK (Flag.MERGE): to the root of a plan that asks for them, from
        the root's own switch (the switches take every host's MERGE ACK into the tree, so only
        a switch ever delivers one)."""
        if self._members(hdr.comm_id) is None:
            return Refusal.UNKNOWN_COMM
        if hdr.root_node != self.node:
            return Refusal.NOT_REPORTER
        refusal = self.from_my_switch(hdr)
        if refusal is not None:
            return refusal
        if self.plan is None or not self.plan(hdr.comm_id, hdr.root_node, hdr.tree).merged_by:
            return Refusal.NOT_MERGED
        return None

    def on_behalf(self, hdr: wire.Header) -> Refusal | None:
        """A NACK's ``tag`` names the member a co-root asks for: one of the members that
        co-root aggregates for that multicast (0: the sender asks for itself)."""
        if not hdr.tag:
            return None
        if self.plan is None:
            return Refusal.NOT_AGGREGATED
        group = self.plan(hdr.comm_id, hdr.root_node, hdr.tree).aggregates.get(hdr.src_node, ())
        return None if hdr.tag in group else Refusal.NOT_AGGREGATED

    def from_my_switch(self, hdr: wire.Header) -> Refusal | None:
        """A frame only a switch makes (RELEASE, RESULT): from the host's own switch."""
        if self.node not in self.directory.places:
            return None  # no placement known (a bare test port): nothing to compare with
        switch = wire.switch_node_id(self.directory.switch_of(self.node))
        return None if hdr.src_node == switch else Refusal.NOT_MY_SWITCH
