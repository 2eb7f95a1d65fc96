"""``python -m mininet_topos.launch``: one workload on a fresh network (make launch).

An entry point only; the code is in mininet_topos/experiments/launch.py."""

import sys

from mininet_topos.experiments.launch import main

if __name__ == "__main__":
    sys.exit(main())
