"""The agent's local read-only endpoint (a Unix socket) and its clients' side."""
