"""The answer of ``gpu-agent npd``: Node Problem Detector's custom-plugin protocol over the
agent's ``/v1/health`` document.

NPD (kubernetes/node-problem-detector, pkg/custompluginmonitor/plugin/plugin.go, v1.34-v1.37)
runs a plugin every ``invoke_interval``, kills it after ``timeout``, and reads its exit code —
0 OK (the condition is False), 1 NonOK (True), anything else Unknown — and its stdout, trimmed
and cut at ``max_output_length`` bytes (80 by default), as the condition's message. So the
message leads with what matters: the worst GPU and subsystem, and how many more there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.gpu_health.subsystems import SUBSYSTEMS

OK, NON_OK, UNKNOWN = 0, 1, 2
NPD_MAX_OUTPUT = 80  # NPD's default max_output_length
_RANK = {"ok": 0, "degraded": 1, "failed": 2}


@dataclass(frozen=True)
class Answer:
    code: int
    message: str


def _fit(text: str, limit: int) -> str:
    """ASCII within ``limit`` bytes (NPD cuts bytes, which could split a character)."""
    text = text.encode("ascii", "replace").decode("ascii")
    return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


def answer(document: Mapping[str, Any], subsystems: Sequence[str] = SUBSYSTEMS,
           at_least: str = "degraded", max_length: int = NPD_MAX_OUTPUT) -> Answer:
    """Exit code and message for the GPUs' state in ``subsystems``: NonOK when any GPU is in
    ``at_least`` (``degraded`` or ``failed``) or worse there, Unknown when the agent cannot
    tell."""
    if document.get("version") != 1 or not isinstance(document.get("devices"), list):
        return Answer(UNKNOWN, _fit("the agent answered an unknown health document", max_length))
    if not document.get("health_engine"):
        return Answer(UNKNOWN, _fit("the agent's health engine is off (health.enabled)",
                                    max_length))
    devices = document["devices"]
    if not devices:
        return Answer(UNKNOWN, _fit("the agent sees no GPU", max_length))
    found: list[tuple[int, int, str, str, str]] = []  # (-rank, index, subsystem, state, why)
    for device in devices:
        parts = device.get("subsystems", {})
        for name in subsystems:
            part = parts.get(name, {})
            state = str(part.get("state", "ok"))
            if _RANK.get(state, 0) >= _RANK[at_least]:
                reasons = part.get("reasons") or ["no reason given"]
                found.append((-_RANK[state], int(device.get("index", -1)), name, state,
                              "; ".join(str(r) for r in reasons)))
    scope = "all subsystems" if tuple(subsystems) == SUBSYSTEMS else "/".join(subsystems)
    if not found:
        return Answer(OK, _fit(f"{len(devices)} GPU(s) healthy ({scope})", max_length))
    found.sort()
    _, index, name, state, why = found[0]
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    head = _fit(f"GPU {index} {name} {state}: {why}", max(max_length - len(more), 0))
    return Answer(NON_OK, _fit(head + more, max_length))
