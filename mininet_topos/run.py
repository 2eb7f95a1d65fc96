"""``python -m mininet_topos.run``: bring up a network and open the Mininet CLI (make run).

An entry point only; the code is in mininet_topos/network/run.py."""

import sys

from mininet_topos.network.run import main

if __name__ == "__main__":
    sys.exit(main())
