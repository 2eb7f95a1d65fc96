"""The fault matrix (``make reliability``): every collective under each fault model, accumulated
in docs/reliability.json and written to docs/reliability.md."""
