"""``python -m mininet_topos.reproduce``: each paper's experiment (make reproduce).

An entry point only; the code is in mininet_topos/experiments/reproduce/runner.py."""

import sys

from mininet_topos.experiments.reproduce.runner import main

if __name__ == "__main__":
    sys.exit(main())
