"""``python -m mininet_topos.bench``: side-by-side timings (make bench).

An entry point only; the code is in mininet_topos/experiments/bench.py."""

import sys

from mininet_topos.experiments.bench import main

if __name__ == "__main__":
    sys.exit(main())
