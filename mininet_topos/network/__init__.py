"""The network and its bring-up: Mininet hosts and links, BMv2 switch processes, readiness,
the control plane and the communicator service (``NetcollNetwork``), and the probes that check
a network is up."""

from mininet_topos.network.interfaces import windows_for
from mininet_topos.network.network import BringUpError, NetcollNetwork, NetworkOptions

__all__ = ["BringUpError", "NetcollNetwork", "NetworkOptions", "windows_for"]
