"""The agent on the new models: what each part serves arrives at a real OTLP receiver as the
part's, and a part the table does not know is what its scenario says, not an A100 (issue 37:
a GH200 served as an A100 lost its SM, tensor and DRAM activity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.simulation.nvidia.models import MODELS
from tests.integration.harness import AgentProcess, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Point, Store

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
FAST = ["--interval", "0.2", "--export-interval", "0.3"]

KNOWN = ("NVIDIA GH200 480GB", "NVIDIA B200", "NVIDIA GeForce RTX 5090", "NVIDIA L40S")
# A Hopper part the table does not know, described by its scenario (nvml.h architecture 9).
UNKNOWN = {"model": "NVIDIA H800 NVL", "architecture": "Hopper", "pci_device_id": "0x233A10DE",
           "memory_total_mib": 95830, "power_limit_w": 400}
# GPM (gpu.sm.utilization): Hopper and newer data-centre parts (nvml.h), not Ada, not GeForce.
GPM = {"NVIDIA GH200 480GB": True, "NVIDIA B200": True, "NVIDIA GeForce RTX 5090": False,
       "NVIDIA L40S": False, "NVIDIA H800 NVL": True}


def test_each_model_s_limits_and_activity_arrive_as_the_part_s(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    devices: list[dict[str, object]] = [
        {"model": name, "utilization_gpu": 60, "utilization_memory": 30} for name in KNOWN]
    devices.append({**UNKNOWN, "utilization_gpu": 60, "utilization_memory": 30})
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": devices})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "state") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
        try:
            store = otlp_grpc_receiver.store

            expected: dict[str, tuple[float, float]] = {
                name: (float(MODELS[name].readings["memory_total_mib"] or 0),
                       float(MODELS[name].readings["power_limit_w"] or 0)) for name in KNOWN}
            expected[str(UNKNOWN["model"])] = (95830.0, 400.0)
            for name, (memory_mib, limit_w) in expected.items():
                assert _arrived(store, "hw.gpu.memory.limit", name) == memory_mib * MIB
                assert _arrived(store, "gpu.power.limit", name) == pytest.approx(limit_w)
            # GPM arrives for the Hopper and Blackwell data-centre parts (two samples apart) ...
            for name, gpm in GPM.items():
                if gpm:
                    _arrived(store, "gpu.sm.utilization", name)
            # ... and, exports later, never for the others (their GPM query is NOT_SUPPORTED).
            seen = len(store.points("gpu.sm.utilization"))
            store.wait_for(lambda s: len(s.points("gpu.sm.utilization")) > seen + 3, timeout=30,
                           what="more GPM exports")
            for name, gpm in GPM.items():
                point = store.latest("gpu.sm.utilization", {"hw.model": name})
                assert (point is not None) == gpm, name
        finally:
            agent.close()


def _arrived(store: Store, metric: str, model: str) -> float:
    """The latest value of ``metric`` on the GPU of ``model``, once one has arrived."""
    def found(s: Store) -> Point | None:
        return s.latest(metric, {"hw.model": model})
    return float(store.wait_for(found, timeout=30, what=f"{metric} of {model}").value)
