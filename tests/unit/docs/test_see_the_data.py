"""docs/getting-started.md, "See the data": the rotel command uses flags and values the
installed rotel-agent knows, and the Prometheus scrape configuration scrapes the port the
agent serves by default (the page's commands were walked by hand; this keeps them in step)."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import rotel
import yaml

from gpu_otel_agent.config.table import default

DOC = Path(__file__).resolve().parents[3] / "docs" / "getting-started.md"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("### See the data")
    return text[start:text.index("\n### ", start + 1)]


def test_the_rotel_command_is_one_rotel_agent_accepts() -> None:
    (line,) = [line for line in _section().splitlines() if "rotel-agent\" start" in line]
    binary = Path(rotel.__file__).parent / "rotel-agent"
    assert "os.path.dirname(rotel.__file__)" in line and binary.exists()
    usage = subprocess.run([str(binary), "start", "--help"], capture_output=True, text=True,
                           timeout=30, check=True).stdout
    words = line.split("start", 1)[1].split()
    flags = [w for w in words if w.startswith("--")]
    assert flags and all(f"{flag} " in usage for flag in flags), flags
    for flag, value in itertools.pairwise(words):
        if flag in ("--exporter", "--debug-log", "--debug-log-verbosity"):
            # clap lists a flag's possible values in its help; --debug-log-verbosity's are
            # basic and detailed (its default is printed).
            assert value in usage, (flag, value)


def test_the_scrape_configuration_scrapes_the_agents_default_port() -> None:
    (block,) = re.findall(r"^```yaml\n(.*?)^```", _section(), re.MULTILINE | re.DOTALL)
    (job,) = yaml.safe_load(block)["scrape_configs"]
    (targets,) = job["static_configs"]
    port = str(default("prometheus.listen")).rpartition(":")[2]
    assert targets["targets"] == [f"localhost:{port}"]
    assert f"curl -s localhost:{port}/metrics" in _section()
