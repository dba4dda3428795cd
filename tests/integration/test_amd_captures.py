"""Captures of real AMD machines (examples/captures/amd/, sources in examples/captures/INDEX.md)
against the simulated node and the agent.

- Replayed: every amd-smi JSON capture becomes simulated GPUs (the simulator's
  ``captures/amd_smi.py``); the agent's readings are compared with the capture
  field by field through the reader's one table (``FIELDS``), divergences listed with their reasons.
- Facts: what the text captures (rocm-smi, amd-smi tables) show about partitioned MI300X, read
  from the files themselves and compared with what the simulated node's amdsmi answers for the
  same ROCm release and partition mode.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.plugins.amd import capture
from gpu_otel_agent.simulation.captures import amd_smi
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.test_amd_fidelity import run_backend
from tests.integration.test_amd_partitions import library_view
from tests.unit.simulator.simhelpers import write_scenario

pytestmark = pytest.mark.integration
CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "amd"
REPLAYED = sorted(CAPTURES.glob("*.json"))

# (capture file, field path) -> why the agent's export differs from what the capture printed.
DIVERGENCES: dict[tuple[str, tuple[str, ...]], str] = {}


def test_there_are_captures_to_replay_and_every_one_is_in_the_index() -> None:
    index = (CAPTURES.parent / "INDEX.md").read_text(encoding="utf-8")
    assert REPLAYED
    for path in sorted(CAPTURES.iterdir()):
        assert f"`amd/{path.name}`" in index, f"{path.name} has no row in INDEX.md"


@pytest.mark.parametrize("path", REPLAYED, ids=lambda p: p.name)
def test_the_agent_exports_what_the_capture_printed(tmp_path: Path, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    devices = amd_smi.scenario_devices(text, path)
    scenario = write_scenario(tmp_path, yaml.safe_dump({"devices": devices}))
    with SimulatedNode.start(scenario, state_dir=tmp_path / "s") as node:
        out = run_backend(node, """
            out = []
            for d in devs:
                d.probe()
                out.append(rd(d, "fast") + rd(d, "slow"))
        """)
    rows = 0
    for gpu, (expected, readings) in enumerate(zip(capture.expected_metrics(text), out,
                                                   strict=True)):
        for field, value in expected:
            got = [v for m, a, v in readings if m == field.metric
                   and all(a.get(k) == x for k, x in field.attributes)]
            reason = DIVERGENCES.get((path.name, field.path))
            if reason is not None:
                continue
            rows += 1
            if value is None:
                assert got == [], (gpu, field.path, "printed N/A: absent")
            else:
                assert got == [pytest.approx(value)], (gpu, field.path, got, value)
    assert rows > 0


def test_malformed_captures_get_a_clear_error() -> None:
    with pytest.raises(capture.AmdCaptureError, match="not JSON"):
        amd_smi.scenario_devices("GPU: 0\n  ASIC:", "x.txt")
    with pytest.raises(capture.AmdCaptureError, match="a list of objects with a 'gpu' key"):
        amd_smi.scenario_devices('{"devices": []}', "x.json")
    assert amd_smi.AMD_SMI_JSON.sniff((CAPTURES / "amd-smi-metric-power.json").read_text())
    assert not amd_smi.AMD_SMI_JSON.sniff("<nvidia_smi_log>")


def _text(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


SCENARIO = """amd_rocm_version: '{rocm}'
devices:
  - {{vendor: amd, model: AMD Instinct MI300X, partition: {{compute: {mode}}},
     memory_used_mib: 284, pci_bus_id: "0000:07:00.0"}}
"""


def _view(tmp_path: Path, rocm: str, mode: str) -> list[dict[str, Any]]:
    text = SCENARIO.format(rocm=rocm, mode=mode)
    with SimulatedNode.start(write_scenario(tmp_path, text, name=f"{rocm}-{mode}.yaml"),
                             state_dir=tmp_path / f"{rocm}-{mode}") as node:
        processors: list[dict[str, Any]] = library_view(node)["processors"]
        return processors


def test_rocm_64_cpx_every_partition_shows_the_whole_vram_and_the_same_use(
    tmp_path: Path
) -> None:
    """ROCm/ROCm issue 4750 (rocm-smi, ROCm 6.4, CPX MI300X): every partition 206141652992 B
    total and the same bytes used."""
    text = _text("mi300x-cpx-x8-rocm64-meminfo.rocm-smi.txt")
    totals = {int(v) for v in re.findall(r"VRAM Total Memory \(B\): (\d+)", text)}
    used = {int(v) for v in re.findall(r"VRAM Total Used Memory \(B\): (\d+)", text)}
    assert len(totals) == 1 and len(used) == 1  # the capture: one figure on every partition
    cpx = _view(tmp_path, "6.4", "CPX")
    assert {p["vram_total"] * capture.MIB for p in cpx} == totals
    assert len({p["vram_used"] for p in cpx}) == 1  # the device's, on every partition


def test_rocm_701_dpx_shares_vram_and_answers_modes_on_xcp0_only(tmp_path: Path) -> None:
    """ROCm/k8s-gpu-dra-driver issue 20 (amd-smi, ROCm 7.0.1, DPX/NPS1 MI300X)."""
    text = _text("mi300x-dpx-nps1-rocm701.amd-smi.txt")
    usage = [(int(u), int(t)) for u, t in re.findall(r"(\d+)/(\d+) MB", text)]
    modes = re.findall(r"\|\s+\d+\s+\d+\s+\S+\s+(\S+) \|", text)
    assert modes[:2] == ["DPX/NPS1", "N/A"]
    dpx = _view(tmp_path, "7.0", "DPX")
    assert [p["compute"] for p in dpx] == ["DPX", None]  # "N/A" on the second partition
    # The whole device (196592 MB) on XCP 0, the even share (98296 MB) on XCP 1.
    assert [p["vram_total"] for p in dpx] == [total for _, total in usage[:2]]
    assert usage[0][1] == 2 * usage[1][1]


def test_rocm_702_dpx_table_has_four_xcc_busy_values_per_partition(tmp_path: Path) -> None:
    """ROCm/amdsmi issue 134 (amd-smi metric --json, ROCm 7.0.2, DPX MI300X): gfx_busy_inst
    per XCP, four values and four N/A each."""
    text = _text("mi300x-dpx-rocm702-metric-usage.pdb.txt")
    per_xcp = re.findall(r"'xcp_\d': \[([^\]]*)\]", text.split("'jpeg_busy'")[0])
    shown = [(part.count("'value'"), part.count("'N/A'")) for part in per_xcp]
    assert shown == [(4, 4), (4, 4)]
    dpx = _view(tmp_path, "7.0", "DPX")
    na32 = 0xFFFF_FFFF
    served = [(sum(v != na32 for v in xcp), sum(v == na32 for v in xcp))
              for xcp in dpx[0]["xcp_busy"]]
    assert served == shown


def test_socket_power_field_per_generation(tmp_path: Path) -> None:
    """ROCm/pytorch PR 1457: MI200 reports only the average socket power, MI300 only the
    current one."""
    text = _text("mi200-mi300-socket-power.pytorch.txt")
    mi200, mi300 = text.split("MI300")
    assert "Current socket power: N/A" in mi200 and "Average socket power: N/A" in mi300
    scenario = write_scenario(tmp_path, """
        devices:
          - {vendor: amd, model: AMD Instinct MI250X, power_w: 94}
          - {vendor: amd, model: AMD Instinct MI300X, power_w: 717}
    """)
    with SimulatedNode.start(scenario, state_dir=tmp_path / "p") as node:
        out = run_backend(node, """
            import amdsmi as A
            out = [A.amdsmi_get_power_info(d.handle) for d in devs]
        """)
    na = (0xFFFF, 0xFFFF_FFFF, "N/A")
    assert out[0]["current_socket_power"] in na and out[0]["average_socket_power"] == 94
    assert out[1]["current_socket_power"] == 717 and out[1]["average_socket_power"] in na


def test_a_capture_of_the_node_replays_as_the_same_gpus(tmp_path: Path) -> None:
    """Round trip: what the agent's capture writer reads of a node (amd-smi JSON through the
    same FIELDS table) serves a second node on which the agent exports the same values."""
    first = write_scenario(tmp_path, """
        devices:
          - {vendor: amd, model: AMD Instinct MI210, power_w: 211, utilization_gpu: 37,
             memory_used_mib: 4096, temperature_c: 51, pci_bus_id: "0000:23:00.0"}
          - {vendor: amd, model: AMD Instinct MI300X, power_w: 640, utilization_gpu: 88,
             utilization_memory: 12, memory_used_mib: 70000, pci_bus_id: "0000:0c:00.0"}
    """, name="first.yaml")
    read = """
        out = []
        for d in devs:
            d.probe()
            out.append(sorted((m, sorted(a.items()), v) for m, a, v in rd(d, "fast") + rd(d, "slow")
                              if m in METRICS))
    """.replace("METRICS", repr(sorted({f.metric for f in capture.FIELDS})))
    with SimulatedNode.start(first, state_dir=tmp_path / "a") as node:
        text = run_backend(node, """
            from gpu_otel_agent.plugins.amd import capture
            out = capture.capture_json(backend._smi, backend._handles)
        """)
        before = run_backend(node, read)
    devices = amd_smi.scenario_devices(text)
    assert [d["model"] for d in devices] == ["AMD Instinct MI210", "AMD Instinct MI300X"]
    second = write_scenario(tmp_path, yaml.safe_dump({"devices": devices}), name="second.yaml")
    with SimulatedNode.start(second, state_dir=tmp_path / "b") as node:
        after = run_backend(node, read)
    assert after == before
    assert any(m == "hw.power" and v == 640 for m, _, v in before[1])


def test_partition_labels_match_what_amds_exporter_shows(tmp_path: Path) -> None:
    """ROCm/device-metrics-exporter PR 316 (a CPX/NPS1 MI300X scrape): every partition is its
    own series with its compute and memory partition type and partition id; the agent labels
    each partition with the same facts (ROCm 7.0: the modes come from XCP 0)."""
    text = _text("mi300x-cpx-nps1-exporter-scrape.fragment.txt")
    labels = dict(re.findall(r'(gpu_compute_partition_type|gpu_memory_partition_type|'
                             r'gpu_partition_id)="(\w+)"', text))
    assert labels == {"gpu_compute_partition_type": "cpx",
                      "gpu_memory_partition_type": "nps1", "gpu_partition_id": "6"}
    scenario = write_scenario(tmp_path, """
        devices:
          - {vendor: amd, model: AMD Instinct MI300X, partition: {compute: CPX, memory: NPS1}}
    """)
    with SimulatedNode.start(scenario, state_dir=tmp_path / "s") as node:
        out = run_backend(node, """
            out = [dict(p.identity.attributes()) for p in devs[0].partitions()]
        """)
    six = next(a for a in out if a["amd.partition.id"] == int(labels["gpu_partition_id"]))
    assert six["amd.partition.compute_mode"] == labels["gpu_compute_partition_type"].upper()
    assert six["amd.partition.memory_mode"] == labels["gpu_memory_partition_type"].upper()
