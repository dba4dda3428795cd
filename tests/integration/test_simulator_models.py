"""Each model of the simulator's table, and a part it does not know, as real pynvml reads them.

The expected values are the model table's rows (each citing its sources); what is checked here is
that the simulated library serves them through NVML's own calls and units, and that the identity
(architecture, PCI ids) is NVML's (pynvml's constants), not a generic part's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpu_otel_agent.simulation.node import ScenarioError, SimulatedNode
from gpu_otel_agent.simulation.nvidia import mig_profiles
from gpu_otel_agent.simulation.nvidia.models import MODELS
from tests.unit.simulator.simhelpers import REPO, run_client, write_scenario

pytestmark = [pytest.mark.integration, pytest.mark.harness]

NEW = ("NVIDIA B200", "NVIDIA GB200", "NVIDIA B300 SXM6 AC", "NVIDIA GB300", "NVIDIA GH200 480GB",
       "NVIDIA H20", "NVIDIA L40S", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
       "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA GeForce RTX 5090")

# Independent of the table: the architecture each part is (NVIDIA's product pages), as
# pynvml names nvml.h's constants.
ARCHITECTURE = {
    "NVIDIA B200": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
    "NVIDIA GB200": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
    "NVIDIA B300 SXM6 AC": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
    "NVIDIA GB300": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
    "NVIDIA GH200 480GB": pynvml.NVML_DEVICE_ARCH_HOPPER,
    "NVIDIA H20": pynvml.NVML_DEVICE_ARCH_HOPPER,
    "NVIDIA L40S": pynvml.NVML_DEVICE_ARCH_ADA,
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
    "NVIDIA GeForce RTX 5090": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
}

_READ = """
out = []
for d in h:
    mem = N.nvmlDeviceGetMemoryInfo(d, N.nvmlMemory_v2)
    pci = N.nvmlDeviceGetPciInfo_v3(d)
    lo, hi = N.nvmlDeviceGetPowerManagementLimitConstraints(d)
    gpm = N.nvmlGpmQueryDeviceSupport(d).isSupportedDevice
    out.append({
        "name": N.nvmlDeviceGetName(d),
        "architecture": N.nvmlDeviceGetArchitecture(d),
        "pci_device_id": pci.pciDeviceId, "pci_subsystem_id": pci.pciSubSystemId,
        "brand": N.nvmlDeviceGetBrand(d),
        "cc": list(N.nvmlDeviceGetCudaComputeCapability(d)),
        "memory_total_mib": mem.total / 2**20,
        "power_limit_w": N.nvmlDeviceGetEnforcedPowerLimit(d) / 1000,
        "power_min_limit_w": lo / 1000, "power_max_limit_w": hi / 1000,
        "max_sm_clock_mhz": N.nvmlDeviceGetMaxClockInfo(d, N.NVML_CLOCK_SM),
        "max_memory_clock_mhz": N.nvmlDeviceGetMaxClockInfo(d, N.NVML_CLOCK_MEM),
        "multiprocessor_count": N.nvmlDeviceGetAttributes_v2(d).multiprocessorCount,
        "pcie_max_link_gen": N.nvmlDeviceGetMaxPcieLinkGeneration(d),
        "gpm_supported": gpm,
        "fan": err(N.nvmlDeviceGetFanSpeed, d),
        "ecc": err(N.nvmlDeviceGetEccMode, d),
    })
"""


def _scenario(devices: str) -> str:
    return f'driver_version: "580.95.05"\ncuda_driver_version: 13000\ndevices:\n{devices}'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Mapping[str, Any]]:
    tmp = tmp_path_factory.mktemp("models")
    devices = "".join(f"  - model: {name}\n" for name in NEW)
    with SimulatedNode.start(write_scenario(tmp, _scenario(devices)),
                             state_dir=tmp / "state") as node:
        out = run_client(node, _READ, timeout=120)
    return {row["name"]: row for row in out}


@pytest.mark.parametrize("name", NEW)
def test_each_new_model_is_served_with_its_values(
    served: Mapping[str, Mapping[str, Any]], name: str
) -> None:
    row, model = served[name], MODELS[name].readings
    assert row["architecture"] == ARCHITECTURE[name]
    assert row["pci_device_id"] & 0xFFFF == 0x10DE  # NVIDIA's vendor id in the low half
    for key in ("architecture", "pci_device_id", "pci_subsystem_id", "brand", "memory_total_mib",
                "power_limit_w", "power_min_limit_w", "power_max_limit_w", "max_sm_clock_mhz",
                "max_memory_clock_mhz", "multiprocessor_count", "pcie_max_link_gen",
                "gpm_supported"):
        assert row[key] == pytest.approx(model[key]), (name, key)
    assert row["cc"] == [model["cuda_cc_major"], model["cuda_cc_minor"]]
    # GPM (SM / tensor / DRAM activity) on Hopper and newer data-centre parts, not GeForce.
    assert bool(row["gpm_supported"]) == (
        ARCHITECTURE[name] >= pynvml.NVML_DEVICE_ARCH_HOPPER
        and row["brand"] != pynvml.NVML_BRAND_GEFORCE)
    # A fan where the part has one; ECC everywhere but on GeForce.
    assert (row["fan"] == "NVMLError_NotSupported") == (model.get("fan_percent") is None)
    assert (row["ecc"] == "NVMLError_NotSupported") == ("GeForce" in name)


def test_every_model_row_cites_its_sources() -> None:
    for name in NEW:
        info = MODELS[name]
        assert info.sources, name
        assert all(key in info.readings or key == "board_part"
                   for key in info.from_reading), name


@pytest.mark.parametrize("name", [n for n in NEW if n in mig_profiles.MODELS])
def test_new_mig_models_enable_their_profiles(tmp_path: Path, name: str) -> None:
    table = mig_profiles.mig_model(name)
    # Half the memory and the smallest compute: 3g + 1g on a 7-slice part, 2g + 1g on RTX PRO.
    profiles = list(table.profiles.values())
    half = next(p for p in profiles if p.memory_slices == 4)
    small = next(p for p in profiles if p.slices == 1)
    devices = (f"  - model: {name}\n    mig:\n      - {{profile: {half.name}}}\n"
               f"      - {{profile: {small.name}}}\n")
    with SimulatedNode.start(write_scenario(tmp_path, _scenario(devices)),
                             state_dir=tmp_path / "state") as node:
        out = run_client(node, """
            migs = [N.nvmlDeviceGetMigDeviceHandleByIndex(h[0], i) for i in range(2)]
            out = sorted([N.nvmlDeviceGetName(m).rsplit(" ", 1)[-1],
                          N.nvmlDeviceGetAttributes_v2(m).multiprocessorCount] for m in migs)
        """)
    assert sorted([[half.name, half.slices * table.sms_per_slice],
                   [small.name, table.sms_per_slice]]) == out


_H100_CAPTURE = REPO / "examples" / "captures" / "nvidia" / "h100-sxm-x8-535.161.08.q.txt"


def test_a_capture_of_an_unknown_model_is_served_as_printed(tmp_path: Path) -> None:
    """A real `nvidia-smi -q` whose part the table does not know (its product name and device
    id changed to an H800 NVL's, 0x233A10DE in NVIDIA's driver README): served with the printed
    architecture, device id and limits, and Hopper's GPM, not a generic part's."""
    text = _H100_CAPTURE.read_text(encoding="utf-8")
    first_gpu = text.index("\nGPU ", text.index("\nGPU ") + 1)  # the capture's first GPU only
    text = text[:first_gpu] + "\n"
    text = text.replace("NVIDIA H100 80GB HBM3", "NVIDIA H800 NVL")
    text = re.sub(r"(Device Id\s+:\s+)0x233010DE", r"\g<1>0x233A10DE", text)
    printed = {label: float(re.search(rf"{label}\s+:\s+([\d.]+) W", text).group(1))  # type: ignore[union-attr]
               for label in ("Max Power Limit", "Min Power Limit")}
    assert "Product Architecture                  : Hopper" in text
    capture = tmp_path / "h800-nvl.q.txt"
    capture.write_text(text, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(f"capture: {capture.name}\n", encoding="utf-8")
    with SimulatedNode.start(tmp_path / "s.yaml", state_dir=tmp_path / "state") as node:
        out = run_client(node, _READ, timeout=120)
    (row,) = out
    assert row["name"] == "NVIDIA H800 NVL"
    assert row["architecture"] == pynvml.NVML_DEVICE_ARCH_HOPPER
    assert row["pci_device_id"] == 0x233A10DE
    assert (row["power_min_limit_w"], row["power_max_limit_w"]) == (
        printed["Min Power Limit"], printed["Max Power Limit"])
    assert row["cc"] == [9, 0] and row["gpm_supported"] == 1  # follow from Hopper


def test_a_scenario_naming_an_unknown_model_is_told_what_to_give(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, _scenario("  - {model: NVIDIA B201, memory_total_mib: 1}\n"))
    with pytest.raises(ScenarioError, match=r"must give architecture, pci_device_id, "
                                            r"memory_total_mib, power_limit_w \(missing: "
                                            r"architecture, pci_device_id, power_limit_w\)"):
        SimulatedNode.start(path)
