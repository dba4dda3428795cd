"""``gpu-agent top``: a live terminal view of what the agent sees."""
