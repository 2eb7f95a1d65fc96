"""``python -m mininet_topos.experiments.reproduce`` (make reproduce): see runner.py."""

import sys

from mininet_topos.experiments.reproduce.runner import main

sys.exit(main())
