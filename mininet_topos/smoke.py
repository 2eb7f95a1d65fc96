"""``python -m mininet_topos.smoke``: bring up, check reachability and a broadcast (make smoke).

An entry point only; the code is in mininet_topos/experiments/smoke.py."""

import sys

from mininet_topos.experiments.smoke import main

if __name__ == "__main__":
    sys.exit(main())
