"""A partitioned GPU with a partition missing: two real 8x MI300X CPX nodes list 63 partitions,
not 64 (issue 38). The simulated node serves such a GPU, and a partition's VRAM share is its
share of the mode's partitions (KFD's 24574 MiB on a CPX MI300X), not of the visible ones
(196592 / 7 = 28084 MiB, +14 %)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.amd.partition_readings import mode_partitions, vram_totals
from tests.unit.simulator.simhelpers import client_env, started_node

MI300X_MIB = 196592
CPX_SHARE = MI300X_MIB // 8  # 24574


def test_the_share_is_of_the_modes_partitions_not_the_visible_ones() -> None:
    assert mode_partitions("CPX", "AMD Instinct MI300X", 7) == 8
    assert mode_partitions("CPX", "AMD Instinct MI300X OAM", 7) == 8
    assert mode_partitions(None, "AMD Instinct MI300X", 3) == 3  # no mode: what is seen
    whole = [MI300X_MIB] * 7  # a library that reports the whole device on every partition
    assert vram_totals(whole, splits=False, partitions=8) == (MI300X_MIB, (CPX_SHARE,) * 7)
    split = [MI300X_MIB] + [CPX_SHARE] * 6  # ROCm 7: XCP 0 the whole, the others their share
    assert vram_totals(split, splits=True, partitions=8) == (MI300X_MIB, (CPX_SHARE,) * 7)
    agree = [CPX_SHARE] * 7  # a library that gives every partition KFD's share
    assert vram_totals(agree, splits=True, partitions=8) == (MI300X_MIB, (CPX_SHARE,) * 7)


_CLIENT = """
import json
import amdsmi as A
from gpu_otel_agent.plugins.amd.backend import AmdBackend
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
handles = A.amdsmi_get_processor_handles()
out = {"ids": [A.amdsmi_get_gpu_kfd_info(h)["current_partition_id"] for h in handles],
       "totals": [A.amdsmi_get_gpu_vram_usage(h)["vram_total"] for h in handles]}
backend = AmdBackend()
backend.open()
(gpu,) = backend.devices()
gpu.probe()
for p in gpu.partitions():
    p.probe()
out["limits"] = [[r.value for r in p.read("slow") if r.metric == "hw.gpu.memory.limit"]
                 for p in gpu.partitions()]
print(json.dumps(out))
"""


@pytest.mark.parametrize(("rocm", "secondary_total"), [("6.4", MI300X_MIB),
                                                       ("7.0", CPX_SHARE)])
def test_a_cpx_mi300x_with_partition_5_missing(tmp_path: Path, rocm: str,
                                               secondary_total: int) -> None:
    scenario = textwrap.dedent(f"""
        amd_rocm_version: "{rocm}"
        devices:
          - vendor: amd
            model: AMD Instinct MI300X
            partition: {{compute: CPX, memory: NPS1, missing: [5]}}
    """)
    with started_node(tmp_path, scenario) as node:
        proc = subprocess.run([sys.executable, "-c", _CLIENT], env=client_env(node),
                              capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ids"] == [0, 1, 2, 3, 4, 6, 7]
    assert out["totals"] == [MI300X_MIB] + [secondary_total] * 6
    assert out["limits"] == [[CPX_SHARE * 1024 * 1024]] * 7
