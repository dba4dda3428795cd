"""Which part of a GPU a health condition is about, and ``gpu.health.status`` from them.

``hw.status`` says a GPU is degraded; ``gpu.health.status`` says where: every cause the health
machine holds belongs to one subsystem (telemetry.md "Health by subsystem"), and a subsystem's
state is the worst of its causes. XIDs are placed by what NVIDIA's XID catalog says they are
about; what no subsystem claims (an unknown XID, a driver recovery action, a hang) is the
``driver``'s.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu_otel_agent.model.snapshot import (
    HealthState,
    HeldCondition,
    Reading,
    SubsystemHealth,
    worst,
)

PCIE, NVLINK, MEMORY, THERMAL, POWER, DRIVER, SM = (
    "pcie", "nvlink", "memory", "thermal", "power", "driver", "sm")
SUBSYSTEMS = (PCIE, NVLINK, MEMORY, THERMAL, POWER, DRIVER, SM)

# NVIDIA XID catalog (docs.nvidia.com/deploy/xid-errors): 79 fell off the bus, 167 PCIe fatal
# timeout; 74 NVLink error, 136 link training, 137 NVLink privilege, 144-150 the NVLink 5 units
# (SAW, RLW, TLW, TREX, NVLPW, NETIR, MSE), 155 NVLink SW-defined; 48/63/64/92/94/95/140/171/172
# ECC / row remapping / contained and uncontained memory errors; 61/62 internal micro-controller
# (PMU) halts are the driver's like the rest.
_XID_SUBSYSTEM = {79: PCIE, 167: PCIE, 74: NVLINK, 136: NVLINK, 137: NVLINK, 155: NVLINK,
                  **dict.fromkeys(range(144, 151), NVLINK),
                  **dict.fromkeys((48, 63, 64, 92, 94, 95, 140, 171, 172), MEMORY)}
# Health-machine causes set outside the gray-failure detector (engine.py, polled.py).
_CAUSE_SUBSYSTEM = {"retired_pages_pending": MEMORY, "row_remap_pending": MEMORY,
                    "row_remap_failure": MEMORY, "ecc:uncorrected": MEMORY}
GRAY_PREFIX = "gray:"


def gray_cause(subsystem: str, condition: str) -> str:
    return f"{GRAY_PREFIX}{subsystem}:{condition}"


def subsystem_of(cause: str) -> str:
    if cause.startswith(GRAY_PREFIX):
        return cause.split(":", 2)[1]
    if cause.startswith("xid:"):
        code = cause[4:]
        return _XID_SUBSYSTEM.get(int(code), DRIVER) if code.isdigit() else DRIVER
    if cause.startswith("mem:"):
        return MEMORY
    return _CAUSE_SUBSYSTEM.get(cause, DRIVER)


def held(causes: Iterable[tuple[str, HealthState, str]]) -> tuple[HeldCondition, ...]:
    """The health machine's causes, each placed in its subsystem."""
    return tuple(HeldCondition(subsystem_of(cause), state, reason)
                 for cause, state, reason in causes)


def states(conditions: Iterable[HeldCondition]) -> dict[str, HealthState]:
    """Each subsystem's state: the worst of its conditions (ok when it has none)."""
    found: dict[str, list[HealthState]] = {name: [] for name in SUBSYSTEMS}
    for condition in conditions:
        found[condition.subsystem].append(condition.state)
    return {name: worst(*states) for name, states in found.items()}


_ALL_OK = tuple(SubsystemHealth(name, HealthState.OK) for name in SUBSYSTEMS)


def subsystem_health(conditions: Iterable[HeldCondition]) -> tuple[SubsystemHealth, ...]:
    """Every subsystem's state and the distinct reasons of its conditions (sorted)."""
    by_name: dict[str, list[HeldCondition]] = {}
    for condition in conditions:
        by_name.setdefault(condition.subsystem, []).append(condition)
    if not by_name:
        return _ALL_OK  # most GPUs, most of the time: one tuple for all of them
    return tuple(
        SubsystemHealth(name, worst(*(c.state for c in mine)),
                        tuple(sorted({c.reason for c in mine if c.reason})))
        if (mine := by_name.get(name)) else ok
        for name, ok in zip(SUBSYSTEMS, _ALL_OK, strict=True))


def status_readings(by_subsystem: dict[str, HealthState]) -> tuple[Reading, ...]:
    """``gpu.health.status``: 1 for each subsystem's current state, 0 for the others."""
    return tuple(
        Reading("gpu.health.status", int(state is current),
                (("gpu.health.subsystem", name), ("hw.state", state.value)))
        for name, current in by_subsystem.items() for state in HealthState
    )
