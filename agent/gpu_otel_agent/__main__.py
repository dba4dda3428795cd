"""``python -m gpu_otel_agent``: the same as the ``gpu-agent`` command."""

from __future__ import annotations

from gpu_otel_agent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
