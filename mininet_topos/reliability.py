"""``python -m mininet_topos.reliability``: the fault matrix (make reliability).

An entry point only; the code is in mininet_topos/experiments/reliability/runner.py."""

import sys

from mininet_topos.experiments.reliability.runner import main

if __name__ == "__main__":
    sys.exit(main())
