from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node.scenario import (
    Random,
    ScenarioError,
    Sine,
    function_names,
    load_scenario,
    reading_names,
)
from gpu_otel_agent.simulation.nvidia.models import BASE, GENERIC, MODELS
from tests.unit.simulator.simhelpers import REPO, write_scenario

EXAMPLES = sorted((REPO / "examples" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_load(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.devices and sc.vendor == "nvidia"


def test_examples_present() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "h100-8gpu.yaml",
        "mixed-node.yaml",
        "bench-8gpu-64proc.yaml",
        "bench-16gpu-256proc.yaml",
    } <= names


def test_full_format(tmp_path: Path) -> None:
    sc = load_scenario(
        write_scenario(
            tmp_path,
            """
        vendor: nvidia
        driver_version: "580.95.05"
        cuda_driver_version: 13000
        devices:
          - model: NVIDIA H100 80GB HBM3
            uuid: GPU-5b3a1f0e-0000-0000-0000-000000000001
            pci_bus_id: "00000000:18:00.0"
            utilization_gpu: {sine: {min: 10, max: 90, period_s: 60}}
            utilization_memory: {random: {min: 1, max: 5}}
            fan_percent: null
            unsupported: [nvmlDeviceGetEncoderUtilization]
        processes:
          - {device: 0, pid: 4242, used_memory_mib: 20000, sm_util: 45}
          - {device: 0, spawn: {cgroup: "kubepods/burstable/podx/abc"}}
        missing_symbols: [nvmlGpmMetricsGet]
        timeline:
          - {at: 5s,  device: 0, xid: 79}
          - {at: 500ms, device: 0, ecc: {type: double_bit}}
          - {at: 12s, device: 0, set: {utilization_gpu: 10}}
          - {at: 15s, device: 0, hang_ms: 20000}
          - {at: 1m, device: 0, lost: true}
    """,
        )
    )
    d = sc.devices[0]
    assert d.readings["utilization_gpu"] == Sine(10, 90, 60)
    assert d.readings["utilization_memory"] == Random(1, 5)
    assert d.readings["fan_percent"] is None
    assert d.unsupported == ("nvmlDeviceGetEncoderUtilization",)
    assert sc.processes[0].pid == 4242 and sc.processes[1].cgroup == "kubepods/burstable/podx/abc"
    assert [e.at_s for e in sc.timeline] == [0.5, 5, 12, 15, 60]
    assert sc.timeline[0].action == "ecc"
    assert sc.missing_symbols == ("nvmlGpmMetricsGet",)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "devices:\n  - model: X\n  - model: Y\n    utilization_gpuu: 3\n",
            ":4: devices[1].utilization_gpuu: unknown key",
        ),
        (
            "devices:\n  - model: X\n    utilization_gpu: {sine: {min: 1, max: 2}}\n",
            ":3: devices[0].utilization_gpu.sine: missing key 'period_s'",
        ),
        (
            'devices:\n  - model: X\n    utilization_gpu: "high"\n',
            ":3: devices[0].utilization_gpu: expected a number",
        ),
        (
            "devices:\n  - model: X\nprocesses:\n  - {device: 3, pid: 5}\n",
            ":4: processes[0].device: no device 3",
        ),
        (
            "devices:\n  - model: X\ntimeline:\n  - {at: soon, device: 0, xid: 79}\n",
            ":4: timeline[0].at: expected a duration",
        ),
        ("devices:\n  - utilization_gpu: 3\n", ":2: devices[0]: missing key 'model'"),
        (
            "devices:\n  - model: X\n    unsupported: [nvmlNoSuchThing]\n",
            ":3: devices[0].unsupported[0]: unknown NVML function",
        ),
        ("devices: [{model: X}]\nfrobnicate: 1\n", ":2: frobnicate: unknown key"),
        ("devices: [{model: X}]\nvendor: amd\n", ":2: vendor:"),
        ("devices: [{model: X}\n", "not valid YAML"),
    ],
)
def test_errors_name_file_key_line(tmp_path: Path, body: str, expected: str) -> None:
    path = write_scenario(tmp_path, body, "bad.yaml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    msg = str(info.value)
    assert str(path) in msg
    assert expected in msg, msg


def test_tables_are_consistent() -> None:
    readings = set(reading_names())
    for table in (BASE, GENERIC, *(m.readings for m in MODELS.values())):
        assert set(table) <= readings
    assert "nvmlDeviceGetFieldValues" in function_names()
    assert "nvmlEventSetWait_v2" in function_names()


def test_an_unknown_model_is_refused_with_what_it_must_give(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, "devices:\n  - model: NVIDIA H100\n", "bad.yaml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    msg = str(info.value)
    assert f"{path}:2: devices[0].model: unknown nvidia model 'NVIDIA H100'" in msg
    # What it must give, what is missing, and how: named in the message.
    assert ("must give architecture, pci_device_id, memory_total_mib, power_limit_w "
            "(missing: architecture, pci_device_id, memory_total_mib, power_limit_w)") in msg
    assert "architecture: Blackwell, pci_device_id: '0x2B8510DE'" in msg
    assert all(name in msg for name in MODELS)
    amd = write_scenario(tmp_path, "devices:\n  - {vendor: amd, model: MI300X}\n", "amd.yaml")
    with pytest.raises(ScenarioError, match="unknown amd model 'MI300X'; known: AMD Instinct"):
        load_scenario(amd)
    # Memory alone is no longer enough: the unknown part would answer a generic identity.
    half = write_scenario(tmp_path, "devices:\n  - {model: NVIDIA B201, memory_total_mib: "
                          "183359}\n", "half.yaml")
    with pytest.raises(ScenarioError, match=r"\(missing: architecture, pci_device_id, "
                                            r"power_limit_w\)"):
        load_scenario(half)


def test_an_unknown_model_that_gives_its_identity_is_served_with_it(tmp_path: Path) -> None:
    own = write_scenario(tmp_path, "devices:\n  - {model: NVIDIA B201, architecture: Blackwell, "
                         "pci_device_id: '0x2B0010DE', memory_total_mib: 100000, "
                         "power_limit_w: 800}\n  - {model: NVIDIA R100, architecture: 13, "
                         "pci_device_id: 0x3000_10DE, memory_total_mib: 1, power_limit_w: 1, "
                         "cuda_cc_major: 11}\n", "own.yaml")
    first, second = load_scenario(own).devices
    assert first.readings["architecture"] == 10
    assert first.readings["pci_device_id"] == 0x2B0010DE
    # Compute capability and GPM follow from the architecture (nvml.h: GPM on Hopper and newer).
    assert (first.readings["cuda_cc_major"], first.readings["gpm_supported"]) == (10, 1)
    assert second.readings["architecture"] == 13
    assert second.readings["cuda_cc_major"] == 11  # as given
    assert second.readings["pci_device_id"] == 0x300010DE


@pytest.mark.parametrize(("value", "expected"), [
    ("architecture: Lovelace", "unknown architecture 'Lovelace' (one of: Ada, Ada Lovelace"),
    ("pci_device_id: 'zz'", "expected a PCI id as printed ('0x2B8510DE')"),
    ("architecture: null", "an identity value cannot be null"),
])
def test_bad_identity_values_are_named(tmp_path: Path, value: str, expected: str) -> None:
    path = write_scenario(tmp_path, f"devices:\n  - model: NVIDIA B201\n    {value}\n",
                          "bad.yaml")
    with pytest.raises(ScenarioError, match=re.escape(expected)):
        load_scenario(path)


def test_top_level_errors_name_the_file_not_a_pseudo_key(tmp_path: Path) -> None:
    for body in ("- just\n- a list\n", "devices: []\n"):
        path = write_scenario(tmp_path, body, "bad.yaml")
        with pytest.raises(ScenarioError) as info:
            load_scenario(path)
        assert "<top>" not in str(info.value)
        assert str(info.value).startswith(str(path))
    path = write_scenario(tmp_path, "devices: [{model: X}\n", "bad.yaml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}:2:1: not valid YAML: ")
    assert "<unicode string>" not in str(info.value)


def test_a_sim_command_without_a_node_says_so_once(tmp_path: Path) -> None:
    socket = tmp_path / "no-node.sock"
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "sim", "xid", "--socket",
                           str(socket), "--device", "0", "--code", "79"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stdout == ""  # once: not also as JSON on stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"no simulated node at {socket}" in done.stderr
    assert "gpu-agent sim up SCENARIO" in done.stderr
    assert "Errno" not in done.stderr


def test_a_billion_laughs_scenario_is_refused_before_anything_is_expanded(
    tmp_path: Path,
) -> None:
    # 382 bytes that safe_load turns into 9^9 strings: nine levels of nine aliases.
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        levels.append(f"a{level}: &a{level} [{refs}]")
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(levels) + "\ndevices: *a8\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"laughs\.yaml:2:.*aliases .* are not accepted"):
        load_scenario(path)
