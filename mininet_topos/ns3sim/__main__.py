import sys

from mininet_topos.ns3sim.cli import main

sys.exit(main())
