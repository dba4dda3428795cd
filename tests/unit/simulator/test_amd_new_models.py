"""MI325X and MI355X served with their own data (issue 38), read through the real amdsmi."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.simulator.simhelpers import client_env, started_node

_CLIENT = r"""
import json
import amdsmi as A
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
out = []
for h in A.amdsmi_get_processor_handles():
    asic = A.amdsmi_get_gpu_asic_info(h)
    out.append([asic["market_name"], asic["device_id"], asic["num_compute_units"],
                A.amdsmi_get_gpu_vram_usage(h)["vram_total"]])
print(json.dumps(out))
"""


def test_mi325x_and_mi355x_are_served_as_themselves(tmp_path: Path) -> None:
    scenario = ("devices:\n  - {vendor: amd, model: AMD Instinct MI325X}\n"
                "  - {vendor: amd, model: AMD Instinct MI355X}\n"
                "  - {vendor: amd, model: AMD Instinct MI325X, partition: {compute: CPX}}\n")
    with started_node(tmp_path, scenario) as node:
        proc = subprocess.run([sys.executable, "-c", _CLIENT], env=client_env(node),
                              capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out[0] == ["AMD Instinct MI325X", "0x74a5", 304, 262128]
    assert out[1] == ["AMD Instinct MI355X", "0x75a3", 256, 294896]
    assert len(out) == 2 + 8  # the CPX MI325X: eight processors
    assert out[2][2] == 304 // 8  # a partition's share of the CUs
