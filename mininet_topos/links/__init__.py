"""Link models and faults: shaped rates and delays, the seeded fault emulator, and the
fidelity check that says whether a timed run measured the network or the CPU."""
