"""``python -m mininet_topos.experiments.reliability`` (make reliability): see runner.py."""

import sys

from mininet_topos.experiments.reliability.runner import main

sys.exit(main())
