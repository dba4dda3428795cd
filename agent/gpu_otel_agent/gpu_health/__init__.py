"""Event-driven GPU health: XID catalog, state machine, storm control, spool and the engine."""
