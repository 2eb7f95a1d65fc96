"""Link models and faults: the seeded link emulator and the impairments it applies."""
