"""A partition's own VRAM use: amd-smi 26.0.0 on ROCm 7.0.1 prints 283 MB and 492 MB on the two
partitions of one DPX MI300X (examples/captures/amd/mi300x-dpx-nps1-rocm701.amd-smi.txt,
ROCm/k8s-gpu-dra-driver#20) through amdsmi_get_gpu_memory_usage. The agent exports it on each
partition where the library answers it per partition, and keeps the device's use (their sum) on
the GPU (issue 38)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.unit.simulator.simhelpers import client_env, started_node

MIB = 1024 * 1024
CAPTURE = (Path(__file__).resolve().parents[3] / "examples" / "captures" / "amd"
           / "mi300x-dpx-nps1-rocm701.amd-smi.txt")

_CLIENT = """
import json
import os
import amdsmi as A
from gpu_otel_agent.plugins.amd.backend import AmdBackend
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
handles = A.amdsmi_get_processor_handles()
out = {"library": [A.amdsmi_get_gpu_memory_usage(h, A.AmdSmiMemoryType.VRAM) for h in handles]}
backend = AmdBackend()
backend.open()
(gpu,) = backend.devices()
gpu.probe()
def used(device):
    return [r.value for g in ("fast", "slow") for r in device.read(g)
            if r.metric == "hw.gpu.memory.usage"]
out["gpu"] = used(gpu)
out["partitions"] = []
for p in gpu.partitions():
    p.probe()
    out["partitions"].append(used(p))
print(json.dumps(out))
"""


def _captured_use() -> list[int]:
    """Each partition's use as the real amd-smi printed it ("283/196592 MB")."""
    return [int(m) for m in re.findall(r" (\d+)/\d+ MB \|",
                                       CAPTURE.read_text(encoding="utf-8"))][:2]


@pytest.mark.parametrize(("rocm", "per_partition"), [("7.0", True), ("6.4", False)])
def test_each_partition_reports_its_own_vram_use_where_the_library_does(
        tmp_path: Path, rocm: str, per_partition: bool) -> None:
    first, second = _captured_use()
    assert (first, second) == (283, 492)
    scenario = textwrap.dedent(f"""
        amd_rocm_version: "{rocm}"
        devices:
          - vendor: amd
            model: AMD Instinct MI300X
            partition: {{compute: DPX}}
            partitions:
              - {{memory_used_mib: {first}}}
              - {{memory_used_mib: {second}}}
    """)
    with started_node(tmp_path, scenario) as node:
        proc = subprocess.run([sys.executable, "-c", _CLIENT], env=client_env(node),
                              capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["gpu"] == [(first + second) * MIB]  # the device's, on the GPU
    if per_partition:
        assert out["library"] == [first * MIB, second * MIB]
        assert out["partitions"] == [[first * MIB], [second * MIB]]
    else:  # the device's figure on every partition: not a partition's, not exported there
        assert out["library"] == [(first + second) * MIB] * 2
        assert out["partitions"] == [[], []]


_VRAM = """
import json
import os
import amdsmi as A
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
print(json.dumps([A.amdsmi_get_gpu_vram_usage(h)["vram_used"]
                  for h in A.amdsmi_get_processor_handles()]))
"""


def test_vram_megabytes_are_truncated_as_amdsmi_does(tmp_path: Path) -> None:
    # amdsmi_get_gpu_vram_usage divides bytes by 2^20 in integers (amd_smi.cc, ROCm/amdsmi
    # 0ceca28): 1000.75 MiB in use is reported as 1000, not rounded to 1001.
    scenario = ("devices:\n  - {vendor: amd, model: AMD Instinct MI300X, "
                "memory_used_mib: 1000.75}\n")
    with started_node(tmp_path, scenario) as node:
        proc = subprocess.run([sys.executable, "-c", _VRAM], env=client_env(node),
                              capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [1000]


_PROCS = """
import json
import os
import amdsmi as A
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
(h,) = A.amdsmi_get_processor_handles()
print(json.dumps([p["memory_usage"]["vram_mem"] for p in A.amdsmi_get_gpu_process_list(h)]))
"""


@pytest.mark.parametrize(("rocm", "per_kib"), [("6.3", 1024), ("7.0", 1000), ("7.12", 1024)])
def test_process_vram_is_in_the_units_of_the_library_release(tmp_path: Path, rocm: str,
                                                             per_kib: int) -> None:
    # fdinfo prints KiB; amdsmi turned them into bytes x 1024 (0ceca28, ROCm 6.3), x 1000
    # (0e0d8b7) and x kKiB again (rocm-systems 5b3c8b5).
    scenario = textwrap.dedent(f"""
        amd_rocm_version: "{rocm}"
        devices:
          - {{vendor: amd, model: AMD Instinct MI300X}}
        processes:
          - {{device: 0, pid: {os.getpid()}, used_memory_mib: 1000}}
    """)
    with started_node(tmp_path, scenario) as node:
        proc = subprocess.run([sys.executable, "-c", _PROCS], env=client_env(node),
                              capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [1000 * 1024 * per_kib]
