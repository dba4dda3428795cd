"""The GPU's NVLink fabric probe (``nvmlDeviceGetGpuFabricInfoV``) as contract readings.

On an NVLink fabric (GB200/GB300 NVL72, HGX with NVSwitches and Fabric Manager) the driver
registers each GPU with the fabric manager and reports the outcome: the probe's state, its
error status, the clique and cluster the GPU joined, and a health mask. It is read the way
DCGM reads it (``DcgmCacheManager``: the v3 struct, and the v2 struct when the driver answers
ARGUMENT_VERSION_MISMATCH) and judged the way DCGM's NVLink health watch judges it
(``DcgmHealthWatch::MonitorFabricFields``): route unhealthy, bandwidth degraded, route recovery,
access-timeout recovery and an incorrect configuration are faults; a probe not started or
completed with an error status is a failed registration.

A GPU outside a fabric answers NOT_SUPPORTED, and the call is then never made again there.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import pynvml

from gpu_otel_agent.model.snapshot import Reading
from gpu_otel_agent.model.uuid_text import uuid_text

Handle = object

STATES = ("not_supported", "not_started", "in_progress", "completed", "failed")
SUMMARIES = {1: "healthy", 2: "unhealthy", 3: "limited_capacity"}  # nvml.h _HEALTH_SUMMARY_*
# (fault, the nvml.h health-mask field) for the boolean fields: 1 true, 2 false, 0 unsupported.
_BOOLEAN_FAULTS = (
    ("route_unhealthy", "ROUTE_UNHEALTHY"),
    ("degraded_bandwidth", "DEGRADED_BW"),
    ("route_recovery", "ROUTE_RECOVERY"),
    ("access_timeout_recovery", "ACCESS_TIMEOUT_RECOVERY"),
)
FAULTS = (*(name for name, _ in _BOOLEAN_FAULTS), "incorrect_configuration")


def _field(mask: int, name: str) -> int:
    shift = int(getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{name}"))
    width = int(getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_{name}"))
    return (mask >> shift) & width


@dataclass(frozen=True)
class FabricInfo:
    """nvmlGpuFabricInfo_v2_t / _v3_t as plain values (``summary`` None from the v2 struct)."""

    state: int
    status: int
    clique_id: int
    cluster_uuid: bytes
    health_mask: int
    summary: int | None


def _info(struct: ctypes.Structure, v3: bool) -> FabricInfo:
    values = {name: getattr(struct, name) for name, *_ in struct._fields_}
    return FabricInfo(int(values["state"]), int(values["status"]), int(values["cliqueId"]),
                      bytes(values["clusterUuid"]), int(values["healthMask"]),
                      int(values["healthSummary"]) if v3 else None)


def query(handle: Handle) -> FabricInfo:
    """The fabric probe through pynvml: the v3 struct, the v2 one where the driver predates it."""
    v3 = getattr(pynvml, "c_nvmlGpuFabricInfo_v3_t", None)
    if v3 is not None:
        struct = v3()
        try:
            # pynvml hands its argument to the C function as given: the struct by reference.
            pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(struct))
            return _info(struct, True)
        except pynvml.NVMLError as error:
            if error.value != pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
                raise
            # a driver that predates healthSummary (DCGM falls back the same way)
    struct = pynvml.c_nvmlGpuFabricInfo_v2_t()
    pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(struct))
    return _info(struct, False)


def state_name(state: int, status: int) -> str:
    """DCGM's fabric-manager status: a completed probe with an error status failed."""
    if state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED and status != pynvml.NVML_SUCCESS:
        return "failed"
    return STATES[state] if 0 <= state < 4 else "not_supported"


def faults(mask: int) -> dict[str, bool]:
    """Each fault the mask reports on (supported fields only): True while it holds."""
    out = {name: _field(mask, field) == 1 for name, field in _BOOLEAN_FAULTS
           if _field(mask, field) != 0}
    config = _field(mask, "INCORRECT_CONFIGURATION")
    if config != 0:  # 0 not supported, 1 none (a correct configuration)
        out["incorrect_configuration"] = config != 1
    return out


def read(handle: Handle) -> tuple[Reading, ...]:
    return readings(query(handle))


def readings(info: FabricInfo) -> tuple[Reading, ...]:
    state = state_name(info.state, info.status)
    identity: list[tuple[str, str | int]] = []
    if state == "completed":
        identity.append(("gpu.fabric.clique.id", info.clique_id))
        # An all-zero UUID is no cluster (a completed probe outside a multi-node fabric, as
        # H100 HGX reports, meta-pytorch/torchcomms PR 1385; go-nvlib's IsFabricAttached
        # treats it so).
        if any(info.cluster_uuid):
            identity.append(("gpu.fabric.cluster.uuid", uuid_text(info.cluster_uuid)))
    out = [Reading("gpu.fabric.status", int(name == state),
                   (("gpu.fabric.state", name), *identity)) for name in STATES]
    out.extend(Reading("gpu.fabric.fault", int(held), (("gpu.fabric.fault.type", name),))
               for name, held in faults(info.health_mask).items())
    summary = SUMMARIES.get(info.summary) if info.summary is not None else None
    if summary is not None:
        out.extend(Reading("gpu.fabric.health", int(name == summary),
                           (("gpu.fabric.health.summary", name),))
                   for name in SUMMARIES.values())
    return tuple(out)
