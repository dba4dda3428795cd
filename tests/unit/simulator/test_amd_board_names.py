"""Real MI300X boards print their name with a board suffix ("AMD Instinct MI300X OAM",
"AMD Instinct MI300X-O"): partitioning and the MI300X's data must not hang on the bare name
(issue 38). Read through the real amdsmi package in a client of the node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.simulator.simhelpers import client_env, started_node

_CLIENT = r"""
import json
import amdsmi as A
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
out = []
for h in A.amdsmi_get_processor_handles():
    out.append({"name": A.amdsmi_get_gpu_asic_info(h)["market_name"],
                "compute": A.amdsmi_get_gpu_compute_partition(h)
                if A.amdsmi_get_gpu_kfd_info(h)["current_partition_id"] == 0 else None,
                "vram_total": A.amdsmi_get_gpu_vram_usage(h)["vram_total"]})
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", ["AMD Instinct MI300X OAM", "AMD Instinct MI300X-O"])
def test_a_board_named_mi300x_variant_partitions_like_an_mi300x(tmp_path: Path,
                                                                name: str) -> None:
    scenario = f"devices:\n  - {{vendor: amd, model: {name}, partition: {{compute: DPX}}}}\n"
    with started_node(tmp_path, scenario) as node:
        proc = subprocess.run([sys.executable, "-c", _CLIENT], env=client_env(node),
                              capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [p["name"] for p in out] == [name, name]  # two DPX partitions, printed as named
    assert out[0]["compute"] == "DPX"
    assert out[0]["vram_total"] == 196592  # the MI300X's (XCP 0 shows the whole device)
