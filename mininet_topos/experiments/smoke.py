"""``make smoke``: bring a topology up, check it, tear it down.

Checks that every host reaches every other host through the P4 unicast forwarding (a PING
and its PONG for every ordered pair) and that one in-network broadcast reaches every host
exactly once; prints the bring-up time. Exit status 0 only when both hold.
"""

from __future__ import annotations

import argparse
import sys

from mininet_topos.network import NetcollNetwork
from mininet_topos.network.probes import HostSockets, one_broadcast, reachability
from mininet_topos.network.run import add_network_arguments, with_network


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_network_arguments(parser)
    args = parser.parse_args(argv)
    return with_network(args, "smoke test of", check)


def check(net: NetcollNetwork) -> int:
    assert net.mininet is not None
    pids = {h.node_id: net.mininet.get(h.name).pid for h in net.topo.hosts}
    sockets = HostSockets(net.topo, pids)
    try:
        reach = reachability(sockets)
        print(f"*** {reach}")
        members = tuple(h.node_id for h in net.topo.hosts)
        comm_id, seconds = net.create_comm(members)
        print(f"*** communicator {comm_id} of every host installed in {seconds * 1e3:.1f} ms")
        broadcast = one_broadcast(sockets, comm_id, members[0], members)
        print(f"*** {broadcast}")
    finally:
        sockets.close()
    ok = reach.ok and broadcast.ok
    print("*** smoke: PASS" if ok else "*** smoke: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
