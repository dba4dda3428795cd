"""The entry-point groups the core reads are the ones this repository's two distributions declare
(the agent's and the simulator's, gpu-otel-agent-simulator), and the architecture page's table of
them (docs/architecture.md) says what the installed metadata says."""

from __future__ import annotations

import re
from collections import defaultdict
from importlib.metadata import distribution
from pathlib import Path

from gpu_otel_agent.backends.discovery import ENTRY_POINT_GROUP
from gpu_otel_agent.extensions.capture import CAPTURE_WRITER_GROUP
from gpu_otel_agent.extensions.commands import COMMAND_GROUP
from gpu_otel_agent.extensions.doc_topics import DOC_TOPIC_GROUP
from gpu_otel_agent.extensions.node_plugin import NODE_PLUGIN_GROUP
from gpu_otel_agent.extensions.simulation import SIMULATED_NODE_GROUP
from gpu_otel_agent.extensions.workloads import WORKLOAD_SOURCE_GROUP

ARCHITECTURE = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"
CORE_GROUPS = {ENTRY_POINT_GROUP, NODE_PLUGIN_GROUP, WORKLOAD_SOURCE_GROUP, COMMAND_GROUP,
               SIMULATED_NODE_GROUP, DOC_TOPIC_GROUP, CAPTURE_WRITER_GROUP}


DISTRIBUTIONS = ("gpu-otel-agent", "gpu-otel-agent-simulator")


def _declared() -> dict[str, set[str]]:
    """Group -> entry names, from the installed distributions' own metadata."""
    groups: dict[str, set[str]] = defaultdict(set)
    for name in DISTRIBUTIONS:
        for entry in distribution(name).entry_points:
            if entry.group != "console_scripts":
                groups[entry.group].add(entry.name)
    return dict(groups)


def test_every_group_the_core_reads_is_declared_and_no_other() -> None:
    assert set(_declared()) == CORE_GROUPS


def test_the_architecture_page_lists_every_group_and_its_plugins() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Plugins"):]
    rows = re.findall(r"^\| `(gpu_otel_agent\.[a-z_]+)` \|.*\| (.+) \|$", section, re.MULTILINE)
    listed = {group: set(re.findall(r"`([^`]+)`", names)) for group, names in rows}
    assert listed == _declared()
