"""``python -m mininet_topos.stop``: remove what runs left behind (make stop).

An entry point only; the code is in mininet_topos/tooling/stop.py."""

import sys

from mininet_topos.tooling.stop import main

if __name__ == "__main__":
    sys.exit(main())
