from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.cgroups import Cgroups, cgroups, v2_root
from tests.integration.harness import h100, write_scenario

UUIDS = [f"GPU-00000000-0000-4000-8000-00000000000{i}" for i in range(8)]


@pytest.fixture
def four_gpu_node(tmp_path: Path) -> Iterator[SimulatedNode]:
    devices = [h100(i, uuid=UUIDS[i], pci_bus_id=f"00000000:{0x18 + i:02X}:00.0")
               for i in range(4)]
    devices[1]["unsupported"] = ["nvmlDeviceGetEncoderUtilization"]
    scenario = write_scenario(
        tmp_path, {"driver_version": "580.95.05", "cuda_driver_version": 13000,
                   "devices": devices}
    )
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        yield node


@pytest.fixture
def eight_gpu_node(tmp_path: Path) -> Iterator[SimulatedNode]:
    devices = [h100(i, uuid=UUIDS[i]) for i in range(8)]
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": devices})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        yield node


@pytest.fixture
def groups() -> Iterator[Cgroups]:
    """Cgroups (and processes in them) made for the test, removed after it; needs root."""
    with cgroups() as made:
        yield made


@pytest.fixture
def v2() -> Path:
    root = v2_root()
    if root is None:
        pytest.skip("no cgroup v2 hierarchy on this machine")
    return root
