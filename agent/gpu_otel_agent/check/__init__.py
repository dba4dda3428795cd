"""``gpu-agent check``: every prerequisite of a configuration, one line each."""
