"""The GPU fabric probe and NVLink 5 links on the simulated node, read through real pynvml.

The shipped GB200 NVL72 tray scenario (examples/scenarios/gb200-nvl72-tray.yaml) is served:
nvmlDeviceGetGpuFabricInfoV with pynvml's v3 and v2 structs and the deprecated unversioned
call, per-link speed and version fields, and the ``fabric`` operation that degrades a GPU's
fabric health at run time. The health mask is decoded here with pynvml's own constants
(nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_* / _WIDTH_*), independently of the simulator's
encoder.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from gpu_otel_agent.simulation.node import SimCommandError, SimulatedNode
from tests.unit.simulator.simhelpers import client_env, run_client

pytestmark = [pytest.mark.integration, pytest.mark.harness]  # tests the simulated node

TRAY = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "gb200-nvl72-tray.yaml"

READ = """
import uuid
def fabric(d, struct):
    info = struct()
    N.nvmlDeviceGetGpuFabricInfoV(d, N.byref(info))  # pynvml passes the argument as given
    return {"state": info.state, "status": info.status, "clique": info.cliqueId,
            "uuid": str(uuid.UUID(bytes=bytes(info.clusterUuid))), "mask": info.healthMask,
            "summary": getattr(info, "healthSummary", None)}
old = N.c_nvmlGpuFabricInfo_t()
N.nvmlDeviceGetGpuFabricInfo(h[0], N.byref(old))
speed = N.nvmlDeviceGetFieldValues(h[0], [(N.NVML_FI_DEV_NVLINK_GET_SPEED, 0),
                                          (N.NVML_FI_DEV_NVLINK_GET_SPEED, 17),
                                          (N.NVML_FI_DEV_NVLINK_GET_VERSION, 3),
                                          (N.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON, 0),
                                          (N.NVML_FI_DEV_NVLINK_LINK_COUNT, 0)])
out = {
    "v3": [fabric(d, N.c_nvmlGpuFabricInfo_v3_t) for d in h],
    "v2": fabric(h[1], N.c_nvmlGpuFabricInfo_v2_t),
    "v1": [old.state, old.cliqueId],
    "fields": [(f.nvmlReturn, f.value.uiVal) for f in speed],
}
"""


def _health(mask: int, field: str) -> int:
    shift = getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT{field}")
    width = getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_WIDTH{field}")
    return int((mask >> shift) & width)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("fabric")
    with SimulatedNode.start(TRAY, state_dir=tmp / "state") as n:
        yield n


def test_a_gb200_tray_serves_its_fabric_and_nvlink5_links(node: SimulatedNode) -> None:
    out = run_client(node, READ)
    assert len(out["v3"]) == 4  # one compute tray: 4 GPUs
    for gpu in out["v3"]:
        assert gpu["state"] == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
        assert gpu["status"] == pynvml.NVML_SUCCESS
        assert gpu["clique"] == 4026
        assert gpu["uuid"] == "9c6f5af3-53bf-49b5-a436-b66766c413c3"
        assert gpu["summary"] == pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY
        for field in ("_DEGRADED_BW", "_ROUTE_RECOVERY", "_ROUTE_UNHEALTHY",
                      "_ACCESS_TIMEOUT_RECOVERY"):
            assert _health(gpu["mask"], field) == 2  # NVML_GPU_FABRIC_HEALTH_MASK_*_FALSE
        assert _health(gpu["mask"], "_INCORRECT_CONFIGURATION") == (
            pynvml.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE)
    # the v2 struct has no summary; the unversioned call no health at all
    assert out["v2"]["summary"] is None and out["v2"]["clique"] == 4026
    assert out["v1"] == [pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 4026]
    ok = pynvml.NVML_SUCCESS
    assert out["fields"] == [[ok, 53125], [ok, 53125], [ok, 5], [ok, 53125], [ok, 18]]


def test_fabric_degrades_and_heals_at_run_time(node: SimulatedNode) -> None:
    node.command({"op": "fabric", "device": 2, "fabric": {
        "summary": "unhealthy", "health": {"route_unhealthy": True}}})
    gpu = run_client(node, READ)["v3"][2]
    assert gpu["summary"] == pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY
    assert _health(gpu["mask"], "_ROUTE_UNHEALTHY") == 1  # _TRUE
    assert _health(gpu["mask"], "_DEGRADED_BW") == 2  # a partial change leaves the rest
    node.command({"op": "fabric", "device": 2, "fabric": {
        "summary": "healthy", "health": {"route_unhealthy": False}}})
    assert _health(run_client(node, READ)["v3"][2]["mask"], "_ROUTE_UNHEALTHY") == 2


def test_the_command_line_degrades_a_fabric(node: SimulatedNode) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "sim", "fabric",
                           "--device", "0", "--summary", "limited_capacity",
                           "--health", "degraded_bandwidth=true", "--clique-id", "7"],
                          env=client_env(node), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    gpu = run_client(node, READ)["v3"][0]
    assert gpu["summary"] == pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
    assert _health(gpu["mask"], "_DEGRADED_BW") == 1 and gpu["clique"] == 7
    assert _health(gpu["mask"], "_ROUTE_UNHEALTHY") == 2


def test_bad_fabric_commands_are_refused_and_change_nothing(node: SimulatedNode) -> None:
    for entry in ({"state": "sideways"}, {"health": {"route_unhealthy": "maybe"}},
                  {"health": {"colour": True}}, {"cluster_uuid": "not-a-uuid"}, {"clique": 1},
                  {}):
        with pytest.raises(SimCommandError):
            node.command({"op": "fabric", "device": 3, "fabric": entry})
    gpu = run_client(node, READ)["v3"][3]
    assert gpu["state"] == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED and gpu["clique"] == 4026


def test_a_gpu_outside_a_fabric_answers_not_supported(tmp_path: Path) -> None:
    scenario = tmp_path / "h100.yaml"
    scenario.write_text("devices:\n  - model: NVIDIA H100 80GB HBM3\n")
    with SimulatedNode.start(scenario, state_dir=tmp_path / "state") as n:
        out = run_client(n, "info = N.c_nvmlGpuFabricInfo_v3_t()\n"
                            "out = err(N.nvmlDeviceGetGpuFabricInfoV, h[0], N.byref(info))")
    assert out == "NVMLError_NotSupported"
