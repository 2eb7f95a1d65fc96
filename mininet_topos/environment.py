"""``python -m mininet_topos.environment``: deps | doctor (make deps, make doctor).

An entry point only; the code is in mininet_topos/tooling/environment.py."""

import sys

from mininet_topos.tooling.environment import main

if __name__ == "__main__":
    sys.exit(main())
