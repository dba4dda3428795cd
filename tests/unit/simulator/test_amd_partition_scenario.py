"""The scenario's ``partition:`` entries of an AMD device: what the MI300X allows, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.simulation.amd.partitions import PartitionSpec, partition_readings
from gpu_otel_agent.simulation.node.scenario import ScenarioError, load_scenario
from tests.unit.simulator.simhelpers import write_scenario


def _load(tmp_path: Path, device: str, process: str = "") -> object:
    text = f"devices:\n  - {device}\n"
    if process:
        text += f"processes:\n  - {process}\n"
    return load_scenario(write_scenario(tmp_path, text))


def test_modes_and_a_process_on_a_partition(tmp_path: Path) -> None:
    sc = load_scenario(write_scenario(tmp_path, """
        devices:
          - {vendor: amd, model: AMD Instinct MI300X, partition: {compute: cpx, memory: NPS4}}
        processes:
          - {device: 0, partition: 7, pid: 4242}
    """))
    (device,) = sc.devices  # type: ignore[attr-defined]
    assert device.partition == PartitionSpec("CPX", "NPS4", "library")
    assert device.partition.count == 8
    assert sc.processes[0].partition == 7  # type: ignore[attr-defined]


@pytest.mark.parametrize(("device", "process", "message"), [
    ("{vendor: amd, model: AMD Instinct MI210, partition: {compute: CPX}}", "",
     "cannot be partitioned"),
    ("{model: NVIDIA H100 80GB HBM3, partition: {compute: CPX}}", "", "AMD's"),
    ("{vendor: amd, model: AMD Instinct MI300X, partition: {compute: DPX, memory: NPS4}}", "",
     "NPS4 needs compute: CPX"),
    ("{vendor: amd, model: AMD Instinct MI300X, partition: {compute: TPX}}", "",
     "expected one of SPX, DPX, QPX, CPX"),
    ("{vendor: amd, model: AMD Instinct MI300X, partition: {compute: CPX, uuid: random}}", "",
     "uuid: expected one of shared, per_partition"),
    ("{vendor: amd, model: AMD Instinct MI300X, partition: {compute: QPX}}",
     "{device: 0, partition: 4, pid: 1}", "has 4 compute partition(s), no partition 4"),
    ("{vendor: amd, model: AMD Instinct MI300X, partition: {computes: CPX}}", "",
     "unknown key(s) computes"),
])
def test_clear_errors(tmp_path: Path, device: str, process: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _load(tmp_path, device, process)


def test_a_partition_has_its_share_of_vram_and_cus() -> None:
    shares = partition_readings({"memory_total_mib": 196592, "compute_units": 304},
                                PartitionSpec("CPX", "NPS4"))
    assert shares == {"memory_total_mib": 196592 / 8, "compute_units": 38.0}
