"""Each paper's experiment on one network (``make reproduce``), written to docs/results.json and
docs/results.md."""
