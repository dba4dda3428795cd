"""``gpu-agent capture``: the GPUs this node shows, written in their vendor tool's format.

A production feature (a capture attached to a bug report); replaying one as simulated GPUs is
the simulator's (``gpu_otel_agent.simulation.captures``, distribution gpu-otel-agent-simulator).
``capture_commands`` holds the arguments (entry point of ``gpu_otel_agent.commands``),
``writers`` the vendors' writers and the one way a capture reaches its file.
"""
