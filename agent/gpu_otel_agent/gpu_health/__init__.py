"""Event-driven GPU health: XID catalog, state machine, storm control, the engine, and the
verdict (``verdict``) that decides each GPU's one state for every reader."""
