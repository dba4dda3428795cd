"""``/v1/health``: each GPU's state per subsystem and the reasons, from what the agent holds.

The document a remediation hook (``gpu-agent npd``) or a person (``curl --unix-socket``) reads
to learn *which* part of *which* GPU is degraded and why. It writes out each GPU's health as the
health board decided it (``gpu_health/verdict.py``: whether it answers, and the health engine's
conditions, each placed in a subsystem). No GPU library call, no decision made here.

Shape (``version`` 1)::

    {"version": 1, "health_engine": true, "taken_ns": ...,
     "devices": [{"uuid": "GPU-...", "index": 0, "model": "...", "vendor": "nvidia",
                  "state": "degraded",
                  "subsystems": {"pcie": {"state": "degraded", "reasons": ["pcie: ..."]},
                                 "nvlink": {"state": "ok", "reasons": []}, ...}}]}

``health_engine`` false: health events are off, so only lost / failed devices are known.
"""

from __future__ import annotations

from typing import Any

from gpu_otel_agent.model.snapshot import NodeSnapshot

Json = dict[str, Any]
VERSION = 1


def health_view(snapshot: NodeSnapshot) -> Json:
    devices = []
    for device in snapshot.devices:
        if device.identity.partition is not None:
            continue  # health is the physical GPU's
        health = snapshot.health_of(device.identity.uuid)
        devices.append({
            "uuid": device.identity.uuid, "index": device.identity.index,
            "model": device.identity.model, "vendor": device.identity.vendor,
            "state": health.state.value,
            "subsystems": {s.name: {"state": s.state.value, "reasons": list(s.reasons)}
                           for s in health.subsystems},
        })
    return {"version": VERSION,
            "health_engine": any(h.engine for h in snapshot.health.values()),
            "taken_ns": snapshot.taken_ns, "devices": devices}
