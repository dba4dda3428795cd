"""``/v1/health``: each GPU's state per subsystem and the reasons, from what the agent holds.

The document a remediation hook (``gpu-agent npd``) or a person (``curl --unix-socket``) reads
to learn *which* part of *which* GPU is degraded and why. It is built from the snapshot store:
the sampler's view of each device (lost, hung) and the health engine's overlay (its conditions,
each placed in a subsystem). No GPU library call.

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

from gpu_otel_agent.gpu_health.subsystems import DRIVER, SUBSYSTEMS
from gpu_otel_agent.model.snapshot import HealthState, HeldCondition, NodeSnapshot, worst

Json = dict[str, Any]
VERSION = 1


def health_view(snapshot: NodeSnapshot) -> Json:
    devices = []
    for device in snapshot.devices:
        if device.identity.partition is not None:
            continue  # health is the physical GPU's
        overlay = snapshot.overlays.get(device.identity.uuid)
        held: list[HeldCondition] = list(overlay.conditions) if overlay else []
        if device.health is not HealthState.OK:  # the sampler's own view (lost, hung)
            held.append(HeldCondition(DRIVER, device.health, device.reason or "not answering"))
        subsystems: Json = {}
        for name in SUBSYSTEMS:
            mine = [c for c in held if c.subsystem == name]
            subsystems[name] = {
                "state": worst(*(c.state for c in mine)).value,
                "reasons": sorted({c.reason for c in mine if c.reason}),
            }
        state = worst(device.health, overlay.health) if overlay else device.health
        devices.append({
            "uuid": device.identity.uuid, "index": device.identity.index,
            "model": device.identity.model, "vendor": device.identity.vendor,
            "state": state.value, "subsystems": subsystems,
        })
    return {"version": VERSION, "health_engine": bool(snapshot.overlays),
            "taken_ns": snapshot.taken_ns, "devices": devices}
