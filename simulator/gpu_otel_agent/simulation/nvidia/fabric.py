"""The GPU fabric probe, as a scenario writes it, onto the simulated library's fabric readings.

``libnvml_sim.c`` answers ``nvmlDeviceGetGpuFabricInfoV`` (v2 and v3 structs) and the
deprecated ``nvmlDeviceGetGpuFabricInfo`` from the readings ``fabric_state``,
``fabric_status``, ``fabric_clique_id``, ``fabric_health_mask``, ``fabric_health_summary`` and
``fabric_cluster_uuid_0..3``; a device without them answers NOT_SUPPORTED (a GPU outside an
NVLink fabric). A scenario writes::

    fabric:
      state: completed          # not_supported | not_started | in_progress | completed
      status: 0                 # the probe's nvmlReturn_t (checked only when completed)
      clique_id: 4026
      cluster_uuid: 9c6f5af3-53bf-49b5-a436-b66766c413c3
      summary: healthy          # not_supported | healthy | unhealthy | limited_capacity
      health: {degraded_bandwidth: false, route_recovery: false, route_unhealthy: false,
               access_timeout_recovery: false, incorrect_configuration: none,
               partition_assigned: true, gfm: connected}

and the ``fabric`` operation (``gpu-agent sim fabric``, a timeline entry ``fabric:``) changes
any part of it at run time. The bit layout of the health mask is nvml.h's
(``NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*`` / ``_WIDTH_*``), encoded here from the header's
numbers; the agent decodes it with pynvml's constants, so the two meet only at the ABI.
"""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass

STATES = {"not_supported": 0, "not_started": 1, "in_progress": 2, "completed": 3}
SUMMARIES = {"not_supported": 0, "healthy": 1, "unhealthy": 2, "limited_capacity": 3}
# nvml.h NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*
INCORRECT_CONFIGURATION = {"not_supported": 0, "none": 1, "incorrect_sysguid": 2,
                           "incorrect_chassis_sn": 3, "no_partition": 4,
                           "insufficient_nvlinks": 5, "incompatible_gpu_fw": 6,
                           "invalid_location": 7, "gpu_state_invalid": 8}


@dataclass(frozen=True)
class HealthField:
    name: str
    shift: int
    width: int  # the mask of the field after shifting
    values: Mapping[str, int]


# Boolean fields answer 1 for true, 2 for false, 0 for not supported (nvml.h _TRUE/_FALSE).
_BOOL = {"not_supported": 0, "true": 1, "false": 2}
HEALTH_FIELDS: tuple[HealthField, ...] = (
    HealthField("degraded_bandwidth", 0, 0x3, _BOOL),
    HealthField("route_recovery", 2, 0x3, _BOOL),
    HealthField("route_unhealthy", 4, 0x3, _BOOL),
    HealthField("access_timeout_recovery", 6, 0x3, _BOOL),
    HealthField("incorrect_configuration", 8, 0xF, INCORRECT_CONFIGURATION),
    HealthField("partition_assigned", 12, 0x3, _BOOL),
    HealthField("gfm", 14, 0x3, {"not_supported": 0, "connected": 1, "disconnected": 2}),
)
_BY_NAME = {f.name: f for f in HEALTH_FIELDS}
KEYS = ("state", "status", "clique_id", "cluster_uuid", "summary", "health")


class FabricError(ValueError):
    """A fabric entry is malformed; the message says what is wrong."""


def _choice(table: Mapping[str, int], raw: object, what: str) -> int:
    if isinstance(raw, bool):
        raw = "true" if raw else "false"
    if isinstance(raw, str) and raw in table:
        return table[raw]
    raise FabricError(f"{what} must be one of {', '.join(table)}, got {raw!r}")


def _count(raw: object, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 0xFFFFFFFF:
        raise FabricError(f"{what} must be an integer 0..4294967295, got {raw!r}")
    return raw


def health_mask(health: Mapping[str, object], mask: int = 0) -> int:
    """``mask`` with the named fields of ``health`` set to the values given."""
    for name, raw in health.items():
        spec = _BY_NAME.get(str(name))
        if spec is None:
            raise FabricError(f"unknown health field {name!r} (one of {', '.join(_BY_NAME)})")
        value = _choice(spec.values, raw, f"health.{name}")
        mask = (mask & ~(spec.width << spec.shift)) | (value << spec.shift)
    return mask


def uuid_words(text: object) -> tuple[int, int, int, int]:
    """A UUID string as the four big-endian 32-bit words the library stores."""
    try:
        raw = uuid_mod.UUID(str(text)).bytes
    except ValueError as error:
        raise FabricError(f"cluster_uuid must be a UUID, got {text!r}") from error
    return tuple(int.from_bytes(raw[i:i + 4], "big") for i in range(0, 16, 4))  # type: ignore[return-value]


def readings(entry: object, current: Mapping[str, float | None] | None = None
             ) -> dict[str, float]:
    """The readings a (partial) fabric entry sets; ``current``: the device's readings now,
    which a partial ``health`` updates rather than replaces."""
    if not isinstance(entry, Mapping):
        raise FabricError("expected a mapping like {state: completed, clique_id: 1}")
    unknown = [k for k in entry if k not in KEYS]
    if unknown:
        raise FabricError(f"unknown key {unknown[0]!r} (one of {', '.join(KEYS)})")
    out: dict[str, float] = {}
    if "state" in entry:
        out["fabric_state"] = _choice(STATES, entry["state"], "state")
    if "status" in entry:
        out["fabric_status"] = _count(entry["status"], "status")
    if "clique_id" in entry:
        out["fabric_clique_id"] = _count(entry["clique_id"], "clique_id")
    if "summary" in entry:
        out["fabric_health_summary"] = _choice(SUMMARIES, entry["summary"], "summary")
    if "cluster_uuid" in entry:
        for i, word in enumerate(uuid_words(entry["cluster_uuid"])):
            out[f"fabric_cluster_uuid_{i}"] = word
    if "health" in entry:
        health = entry["health"]
        if not isinstance(health, Mapping):
            raise FabricError("health must be a mapping like {route_unhealthy: true}")
        before = (current or {}).get("fabric_health_mask")
        out["fabric_health_mask"] = health_mask(health, int(before or 0))
    if out and "fabric_state" not in out and (current or {}).get("fabric_state") is None:
        out["fabric_state"] = STATES["completed"]  # a fabric entry without a state: probed
    for key in ("fabric_status", "fabric_clique_id"):
        if out and key not in out and (current or {}).get(key) is None:
            out[key] = 0
    return out
