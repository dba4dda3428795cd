"""The fabric probe's decoding (plugins/nvidia/fabric.py) against nvml.h's numbers and a real
GB200 NVL72 value; the end-to-end path is tests/integration/test_fabric.py."""

from __future__ import annotations

import pynvml

from gpu_otel_agent.plugins.nvidia import fabric

ALL_FALSE = 0xAA  # four boolean fields at NVML_GPU_FABRIC_HEALTH_MASK_*_FALSE (2)


def test_a_healthy_nvl72_mask_reports_every_fault_false() -> None:
    """``healthMask 0xaa`` from a GB200 NVL72 (NVIDIA/nccl issue 2186, read there as four paths
    down): each two-bit field is 2, "not degraded" / "not in progress" / "healthy"."""
    assert fabric.faults(ALL_FALSE) == {"route_unhealthy": False, "degraded_bandwidth": False,
                                        "route_recovery": False,
                                        "access_timeout_recovery": False}


def test_each_field_is_read_at_its_nvml_h_shift() -> None:
    for name, field in (("route_unhealthy", "ROUTE_UNHEALTHY"),
                        ("degraded_bandwidth", "DEGRADED_BW"),
                        ("route_recovery", "ROUTE_RECOVERY"),
                        ("access_timeout_recovery", "ACCESS_TIMEOUT_RECOVERY")):
        shift = getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{field}")
        mask = (ALL_FALSE & ~(0x3 << shift)) | (1 << shift)  # this one true
        held = fabric.faults(mask)
        assert held[name] is True and sum(held.values()) == 1, name
    assert fabric.faults(0) == {}  # nothing supported: nothing reported
    config = pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION
    assert fabric.faults(1 << config) == {"incorrect_configuration": False}  # NONE
    insufficient = (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS
                    << config)
    assert fabric.faults(insufficient) == {"incorrect_configuration": True}


def test_a_completed_probe_with_an_error_status_failed() -> None:
    completed = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
    assert fabric.state_name(completed, pynvml.NVML_SUCCESS) == "completed"
    assert fabric.state_name(completed, pynvml.NVML_ERROR_UNKNOWN) == "failed"
    assert fabric.state_name(pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS,
                             pynvml.NVML_ERROR_UNKNOWN) == "in_progress"  # status unread
    assert fabric.state_name(9, 0) == "not_supported"


def test_a_completed_probe_without_a_cluster_names_no_cluster() -> None:
    """H100 HGX outside a multi-node fabric reports a completed probe with an all-zero cluster
    UUID (meta-pytorch/torchcomms PR 1385): a clique, no cluster."""
    info = fabric.FabricInfo(pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0, 0, bytes(16), 0, None)
    (completed,) = [r for r in fabric.readings(info) if r.value == 1]
    assert dict(completed.attributes) == {"gpu.fabric.state": "completed",
                                          "gpu.fabric.clique.id": 0}
    # no health from a v2 struct or an all-unsupported mask: the fabric metric only
    assert {r.metric for r in fabric.readings(info)} == {"gpu.fabric.status"}
    named = fabric.FabricInfo(pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0, 4026,
                              bytes.fromhex("9c6f5af353bf49b5a436b66766c413c3"), ALL_FALSE, 2)
    by_metric = {(r.metric, dict(r.attributes).get("gpu.fabric.health.summary")): r.value
                 for r in fabric.readings(named)}
    assert by_metric[("gpu.fabric.health", "unhealthy")] == 1
    assert by_metric[("gpu.fabric.health", "healthy")] == 0
