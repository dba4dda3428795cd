"""The NVML audit table names every NVML function the agent calls.

The agent's calls are found in its source (gpu_otel_agent/plugins/nvidia)
by AST: each attribute of ``pynvml`` named ``nvml*`` that is a function, and each string literal
naming an NVML C symbol (the names the agent looks up itself, e.g. the ``_v3`` process lists).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pynvml

from gpu_otel_agent.simulation.nvidia.error_policy_doc import struct_fields

PLUGIN = Path(__file__).resolve().parents[3] / "plugins/gpu_otel_agent/plugins/nvidia"
AUDIT = PLUGIN.parents[3] / "simulator/gpu_otel_agent/simulation/nvidia/NVML_AUDIT.md"
_NAME = re.compile(r"^nvml[A-Z]\w*$")


def _is_constant(name: str) -> bool:
    return hasattr(pynvml, name) and not callable(getattr(pynvml, name))


def agent_calls() -> set[str]:
    found: set[str] = set()
    # pynvml's structure fields (``nvmlReturn``) are named as strings where the plugin reads
    # them from an array's bytes (field_values.py); they are not calls.
    fields = struct_fields()
    for path in PLUGIN.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "pynvml" and _NAME.match(node.attr)
                    and not _is_constant(node.attr)):
                found.add(node.attr)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _NAME.match(node.value) and not _is_constant(node.value)
                    and node.value not in fields):
                found.add(node.value)
    return found


def audited() -> set[str]:
    names: set[str] = set()
    for line in AUDIT.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        names.update(n for n in re.findall(r"`(\w+)`", first) if _NAME.match(n))
        names.update(f"{n}{v}" for n, v in re.findall(r"`(nvml\w+)` \(C `(_v\d)`\)", first))
    return names


def test_agent_source_yields_its_nvml_calls() -> None:
    calls = agent_calls()
    # a few the agent certainly makes, so an empty scan cannot pass
    assert {"nvmlDeviceGetFieldValues", "nvmlEventSetWait_v2",
            "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetComputeRunningProcesses_v3"} <= calls
    assert "nvmlEventTypeXidCriticalError" not in calls  # constants are not calls


def test_every_nvml_call_of_the_agent_is_in_the_audit_table() -> None:
    missing = sorted(agent_calls() - audited())
    assert not missing, f"add a line to {AUDIT.name} for: {', '.join(missing)}"
