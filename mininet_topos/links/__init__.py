"""Link models and faults: shaped rates, delays and queues, the seeded link emulator and the
impairments it applies, and the fidelity check that says whether a timed run measured the
network or the CPU."""
