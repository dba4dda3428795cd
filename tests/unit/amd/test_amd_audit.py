"""The amdsmi audit table (simulator/gpu_otel_agent/simulation/amd/AMD_AUDIT.md) names every
amdsmi function the simulated library implements and every one the agent calls.

The simulator's functions are its ``AMD_FUNCS`` (read from the C source); the agent's calls are
found by AST in ``gpu_otel_agent/plugins/amd``: each attribute named
``amdsmi_*`` that is a function of the ``amdsmi`` package, and each string literal naming one (the
call names the agent logs and classifies by)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpu_otel_agent.simulation.amd.scenario import function_names

PLUGIN = Path(__file__).resolve().parents[3] / "plugins/gpu_otel_agent/plugins/amd"
AUDIT = PLUGIN.parents[3] / "simulator/gpu_otel_agent/simulation/amd/AMD_AUDIT.md"
_NAME = re.compile(r"^amdsmi_(get|set|init|stop|shut|status|free)\w*$")


def agent_calls() -> set[str]:
    found: set[str] = set()
    for path in PLUGIN.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and _NAME.match(node.attr):
                found.add(node.attr)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _NAME.match(node.value)):
                found.add(node.value)
    return found


def audited() -> set[str]:
    names: set[str] = set()
    for line in AUDIT.read_text().splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`(amdsmi_\w+)`", line.split("|")[1]))
    return names


def test_sources_yield_calls() -> None:
    assert {"amdsmi_get_gpu_metrics_info", "amdsmi_get_gpu_vram_usage",
            "amdsmi_get_gpu_ecc_enabled", "amdsmi_get_lib_version"} <= agent_calls()
    assert "amdsmi_get_gpu_kfd_info" in function_names()


def test_every_simulated_function_is_in_the_audit_table() -> None:
    missing = sorted(set(function_names()) - audited())
    assert not missing, f"add a line to {AUDIT.name} for: {', '.join(missing)}"


def test_every_amdsmi_call_of_the_agent_is_in_the_audit_table() -> None:
    missing = sorted(agent_calls() - audited())
    assert not missing, f"add a line to {AUDIT.name} for: {', '.join(missing)}"


def test_every_line_names_a_function_someone_uses() -> None:
    stale = sorted(audited() - set(function_names()) - agent_calls()
                   - {"amdsmi_get_gpu_partition_metrics_info"})
    assert not stale, f"{AUDIT.name} has lines for functions nobody uses: {', '.join(stale)}"


def _rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in AUDIT.read_text().splitlines():
        if line.startswith("| `"):
            for name in re.findall(r"`(amdsmi_\w+)`", line.split("|")[1]):
                rows[name] = line
    return rows


def test_no_row_calls_a_function_the_agent_calls_not_called() -> None:
    wrong = sorted(n for n, line in _rows().items()
                   if n in agent_calls() and "| not called |" in line)
    assert not wrong, f"{AUDIT.name} says these are not called; the agent calls them: {wrong}"


def test_the_exported_names_in_the_table_are_the_catalog_s() -> None:
    from gpu_otel_agent.model.metrics import spec_for
    from gpu_otel_agent.model.renames import RENAMES

    retired = {r.old for r in RENAMES}
    for name, line in _rows().items():
        exported = line.split("|")[4]
        for metric in re.findall(r"`((?:hw|gpu)\.[a-z_.]+)`", exported):
            if metric in retired and "retired" not in exported:
                raise AssertionError(f"{name}: {metric} is a retired name")
            if metric not in retired:
                spec_for(metric)  # raises for a name the catalog does not have
