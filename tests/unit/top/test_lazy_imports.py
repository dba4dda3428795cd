"""The terminal library is loaded by the live screen of ``gpu-agent top`` only: never by the
agent (its memory budget) nor by the CLI's other commands."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import gpu_otel_agent.cli as cli
import gpu_otel_agent.runtime.agent
cli.build_parser()
print(json.dumps({name: name in sys.modules for name in (
    "blessed", "pyte", "gpu_otel_agent.top.screen", "gpu_otel_agent.check.export",
    "gpu_otel_agent.check.host")}))
"""


def test_building_the_cli_and_the_agent_loads_no_terminal_library() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, check=True)
    loaded = json.loads(done.stdout)
    assert loaded == {"blessed": False, "pyte": False, "gpu_otel_agent.top.screen": False,
                      "gpu_otel_agent.check.export": False,
                      "gpu_otel_agent.check.host": False}, loaded
