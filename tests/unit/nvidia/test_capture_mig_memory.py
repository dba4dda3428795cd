"""MIG memory as real GPUs report it: the simulator's per-profile figures
(``mig_profiles.REPORTED_GIB``) against the corpus's ``nvidia-smi mig -lgip`` tables and MIG
devices (examples/captures/nvidia/, sources in INDEX.md)."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.simulation.captures.nvidia_smi.formats import parse
from gpu_otel_agent.simulation.nvidia import mig_profiles
from gpu_otel_agent.simulation.nvidia.models import model_info

CORPUS = Path(__file__).resolve().parents[3] / "examples" / "captures" / "nvidia"
_LGIP = re.compile(r"^\|\s+\d+\s+MIG (\S+)\s+\d+\s+\d+/\d+\s+([\d.]+)\s", re.M)
_MIG_ROW = re.compile(r"^\|\s+\d+\s+(\d+)\s+(\d+)\s+\d+\s+\|\s+\d+MiB /\s+(\d+)MiB \|\s+(\d+)\s",
                      re.M)


def _served_mib(model: str, profile: str) -> float:
    table = mig_profiles.mig_model(model)
    total = model_info(model).readings.get("memory_total_mib") or 0.0
    return mig_profiles.memory_mib(table.profiles[profile], float(total), model)


def test_h200_profiles_serve_the_memory_lgip_printed() -> None:
    printed = dict(_LGIP.findall((CORPUS / "h200-mig-lgip.txt").read_text(encoding="utf-8")))
    assert {"1g.18gb", "1g.18gb+me", "3g.71gb", "4g.71gb", "7g.141gb", "1g.35gb"} <= set(printed)
    for profile, gib in printed.items():
        assert _served_mib("NVIDIA H200", profile) == float(gib) * 1024, profile


def test_a100_80gb_mig_devices_serve_the_memory_they_printed() -> None:
    """The telegraf A100 (1g.20gb, nvidia-smi -q -x) and nvitop#8's table (2g.20gb, 28 SMs)
    both print 19968 MiB for a two-eighths instance."""
    gpu = parse(CORPUS / "a100-sxm4-80gb-mig-1g20gb-x4.q.xml").gpus[0]
    assert {m.memory_total for m in gpu.mig_devices} == {"19968 MiB"}
    assert _served_mib("NVIDIA A100-SXM4-80GB", "1g.20gb") == 19968
    rows = _MIG_ROW.findall((CORPUS / "a100-80gb-mig-devices-gi-3-5-6.smi.txt").read_text())
    assert rows and {(total, sms) for _gi, _ci, total, sms in rows} == {("19968", "28")}
    assert _served_mib("NVIDIA A100-SXM4-80GB", "2g.20gb") == 19968
