"""nvitop (unmodified, from PyPI) lists the MIG instances of the simulated node, as it does on a
real MIG-enabled GPU: its own NVML wrapper, its own enumeration, its own process table; and the
agent reads GPM activity per instance on a Hopper GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration


def test_nvitop_lists_the_instances_and_their_processes(tmp_path: Path) -> None:
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "uuid": UUIDS[0],
            "mig": [{"profile": "3g.40gb", "memory_used_mib": 20000},
                    {"profile": "1g.10gb", "memory_used_mib": 5000},
                    {"profile": "1g.10gb", "memory_used_mib": 0}]}
    scenario = write_scenario(tmp_path, {
        "devices": [a100, h100(1, uuid=UUIDS[1])],
        "processes": [{"device": 0, "mig": 1, "pid": 4242, "used_memory_mib": 4000}]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        env = {**os.environ, **node.env, "COLUMNS": "140"}
        done = subprocess.run([sys.executable, "-m", "nvitop", "--once"], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # One row per instance under its GPU: index parent:instance, profile, GI/CI ids, memory.
    rows = re.findall(r"│ (\d+):(\d+)\s+(\S+) @ GI/CI:\s*(\d+)/(\d+)\s*│\s*(.+?) / (.+?) │", out)
    assert [(r[0], r[1], r[2], r[5].strip(), r[6].strip()) for r in rows] == [
        # Totals as real A100 80GB instances report them (mig_profiles.REPORTED_GIB).
        ("0", "0", "3g.40gb", "20000MiB", "39.25GiB"),
        ("0", "1", "1g.10gb", "5000MiB", "9728MiB"),
        ("0", "2", "1g.10gb", "0B", "9728MiB"),
    ], out
    assert len({r[3] for r in rows}) == 3  # distinct GPU instance ids
    assert re.search(r"Enabled", out) and re.search(r"Disabled", out), out  # MIG M. column
    # The process on instance 1 is listed as on GPU 0:1.
    assert re.search(r"│ 0:1\s+4242 C", out), out


def test_nvitop_api_reads_a_mig_devices_compute_mode(tmp_path: Path) -> None:
    """nvml.h: "If MIG is enabled on a GPU, device must be MIG device handle" for the compute
    mode: a MIG handle answers it (the simulated node said NOT_SUPPORTED, nvitop showed N/A)."""
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "uuid": UUIDS[0],
            "mig": [{"profile": "3g.40gb"}, {"profile": "1g.10gb"}]}
    scenario = write_scenario(tmp_path, {"devices": [a100]})
    script = (
        "import json\n"
        "from nvitop import Device, MigDevice\n"
        "migs = Device(0).mig_devices()\n"
        "found = MigDevice(uuid=migs[1].uuid())\n"
        "print(json.dumps({'modes': [m.compute_mode() for m in migs],\n"
        "                  'index': list(found.index)}))\n")
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        done = subprocess.run([sys.executable, "-c", script], env={**os.environ, **node.env},
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"modes": ["Default", "Default"], "index": [0, 1]}


def test_gpm_activity_per_instance_on_hopper(tmp_path: Path,
                                             otlp_grpc_receiver: OtlpGrpcReceiver) -> None:
    """SM/tensor/DRAM activity per MIG device (nvmlGpmSampleGet on its handle), as the node
    serves it."""
    h100_mig = {"model": "NVIDIA H100 80GB HBM3", "uuid": UUIDS[0],
                "mig": [{"profile": "3g.40gb", "sm_active": 40, "tensor_active": 20,
                         "dram_active": 10},
                        {"profile": "4g.40gb", "sm_active": 70}]}
    scenario = write_scenario(tmp_path, {"devices": [h100_mig]})
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {gpm: {interval: 0.3}, slow: {interval: 1}}\n", encoding="utf-8")
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--interval", "0.3", "--export-interval", "0.3", "--config",
                              str(config)])
        try:
            store = otlp_grpc_receiver.store

            def activity() -> dict[tuple[object, str], float]:
                return {(p.attributes.get("gpu.mig.profile"), p.metric): p.value
                        for metric in ("gpu.sm.utilization", "gpu.tensor.utilization",
                                       "gpu.dram.utilization")
                        for p in store.points(metric, {"hw.parent": UUIDS[0]})}

            found = store.wait_for(lambda s: len(activity()) == 6 and activity(), timeout=20,
                                   what="GPM per instance")
            assert found[("3g.40gb", "gpu.sm.utilization")] == pytest.approx(0.40)
            assert found[("3g.40gb", "gpu.tensor.utilization")] == pytest.approx(0.20)
            assert found[("3g.40gb", "gpu.dram.utilization")] == pytest.approx(0.10)
            assert found[("4g.40gb", "gpu.sm.utilization")] == pytest.approx(0.70)
            agent.shutdown()
        finally:
            agent.close()
