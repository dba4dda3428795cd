"""Real ``amdsmi`` against the compiled simulated libamd_smi.so, on a mixed node (no patching)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_otel_agent.simulation.node import ScenarioError, SimCommandError, SimulatedNode
from gpu_otel_agent.simulation.sim_commands import main as sim_cli
from tests.unit.simulator.simhelpers import client_env, run_client, write_scenario

pytestmark = [pytest.mark.integration, pytest.mark.harness]  # tests the simulated node

SCENARIO = """
devices:
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: 20
  - vendor: amd
    model: AMD Instinct MI300X
    utilization_gpu: 64
    temperature_c: null
    memory_used_mib: 2048
  - vendor: amd
    model: AMD Instinct MI210
    unsupported: [amdsmi_get_gpu_total_ecc_count]
processes:
  - {device: 1, used_memory_mib: 1024, sm_util: 50}
"""

_AMD_PRELUDE = """
import json, os, sys, time
import amdsmi as A
A.amdsmi_init()
h = A.amdsmi_get_processor_handles()
def err(fn, *a):
    try:
        fn(*a)
        return "ok"
    except A.AmdSmiLibraryException as e:
        return e.get_error_code()
"""


def run_amd(node: SimulatedNode, code: str, timeout: float = 30) -> Any:
    script = _AMD_PRELUDE + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", script], env=client_env(node),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("amdnode")
    with SimulatedNode.start(write_scenario(tmp, SCENARIO), state_dir=tmp / "state") as n:
        yield n


def test_each_vendor_library_sees_only_its_gpus(node: SimulatedNode) -> None:
    amd = run_amd(node, """
        T = A.AmdSmiTemperatureType; M = A.AmdSmiTemperatureMetric
        out = {"count": len(h), "names": [A.amdsmi_get_gpu_asic_info(x)["market_name"] for x in h],
               "activity": A.amdsmi_get_gpu_activity(h[0]),
               "vram": A.amdsmi_get_gpu_vram_usage(h[0]),
               "edge": err(A.amdsmi_get_temp_metric, h[0], T.EDGE, M.CURRENT),
               "ecc0": err(A.amdsmi_get_gpu_total_ecc_count, h[0]),
               "ecc1": err(A.amdsmi_get_gpu_total_ecc_count, h[1]),
               "procs": [(p["pid"], p["memory_usage"]["vram_mem"])
                         for p in A.amdsmi_get_gpu_process_list(h[0])]}
    """)
    assert amd["count"] == 2
    assert amd["names"] == ["AMD Instinct MI300X", "AMD Instinct MI210"]
    assert amd["activity"]["gfx_activity"] == 64
    assert amd["vram"] == {"vram_total": 196592, "vram_used": 2048}
    assert amd["edge"] == 2  # AMDSMI_STATUS_NOT_SUPPORTED: the scenario said null
    assert amd["ecc0"] == "ok" and amd["ecc1"] == 2  # unsupported on that device only
    # fdinfo's KiB times 1000, as amdsmi's fdinfo.cc (ROCm/amdsmi 0e0d8b7) reports them
    assert len(amd["procs"]) == 1 and amd["procs"][0][1] == 1024 * 1024 * 1000
    nvidia = run_client(node, 'out = {"count": len(h), "name": N.nvmlDeviceGetName(h[0])}')
    assert nvidia == {"count": 1, "name": "NVIDIA H100 80GB HBM3"}


def test_events_lost_reset_and_call_counts(node: SimulatedNode) -> None:
    reader = subprocess.Popen(
        [sys.executable, "-c", _AMD_PRELUDE + textwrap.dedent("""
            E = A.AmdSmiEvtNotificationType
            r = A.AmdSmiEventReader(h[1], [E.VMFAULT, E.GPU_PRE_RESET, E.GPU_POST_RESET])
            print("ready", flush=True)
            seen, during = [], None
            deadline = time.monotonic() + 60
            while len(seen) < 3 and time.monotonic() < deadline:
                try:
                    seen += [(e["event"], e["message"]) for e in r.read(500)]
                except A.AmdSmiLibraryException as e:
                    assert e.get_error_code() == 40  # NO_DATA: the wait timed out
                if during is None and [s[0] for s in seen][-1:] == ["GPU_PRE_RESET"]:
                    # Inside the reset, known by the event order (the reset began, its end
                    # not read yet), not by a wall-clock window after the command.
                    during = [err(A.amdsmi_get_gpu_activity, h[1]),
                              err(A.amdsmi_get_gpu_device_bdf, h[1])]
            print(json.dumps({"seen": seen, "during": during}), flush=True)
        """)],
        env=client_env(node), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert reader.stdout is not None
        assert reader.stdout.readline().strip() == "ready"
        node.command({"op": "event", "device": 1, "type": "vm_fault", "message": "not mine"})
        node.command({"op": "event", "device": 2, "type": "thermal_throttle"})  # masked out
        node.command({"op": "event", "device": 2, "type": "vm_fault", "message": "fault at 0x10"})
        # The reset lasts 10 s of the node's clock: long beside one call made as soon as its
        # beginning is read (the reader's wait wakes on the event), even on a loaded machine
        # (3 s was once too short for a reader starved of CPU in a full CI run).
        node.command({"op": "reset", "device": 2, "ms": 10000})
        result = json.loads(reader.stdout.readline())
    finally:
        reader.kill()
        reader.wait()
    assert result["seen"] == [["VMFAULT", "fault at 0x10"], ["GPU_PRE_RESET", "GPU reset begin"],
                              ["GPU_POST_RESET", "GPU reset end"]]
    # amdgpu answers EPERM during a reset: rocm_smi's ErrnoToRsmiStatus says NOT_SUPPORTED;
    # the BDF amdsmi holds from init still answers.
    assert result["during"] == [2, "ok"]
    assert run_amd(node, 'out = err(A.amdsmi_get_gpu_activity, h[1])') == "ok"

    node.command({"op": "lost", "device": 1})
    # Off the bus: the handle stays valid (not NOT_FOUND); sysfs reads are NOT_SUPPORTED (the
    # files are gone), the DRM ioctl fails (DRM_ERROR), the cached BDF still answers.
    assert run_amd(node, 'out = [err(A.amdsmi_get_gpu_activity, x) for x in h]') == [2, "ok"]
    assert run_amd(node, 'out = err(A.amdsmi_get_gpu_vram_usage, h[0])') == 6
    assert run_amd(node, 'out = err(A.amdsmi_get_gpu_device_bdf, h[0])') == "ok"
    node.command({"op": "recover", "device": 1})
    node.command({"op": "hang", "device": 1, "ms": 400})
    took = run_amd(node, """
        t = time.monotonic(); A.amdsmi_get_gpu_activity(h[0]); out = time.monotonic() - t
    """)
    assert took >= 0.35
    node.command({"op": "ecc", "device": 1, "type": "double_bit"})
    assert run_amd(node, 'out = A.amdsmi_get_gpu_total_ecc_count(h[0])')[
        "uncorrectable_count"] == 1

    before = node.stats()
    run_amd(node, 'A.amdsmi_get_gpu_activity(h[1]); out = 0')
    after = node.stats()
    calls_before, calls_after = before["calls"], after["calls"]
    assert isinstance(calls_before, dict) and isinstance(calls_after, dict)
    assert calls_after["amdsmi_get_gpu_activity"] - calls_before["amdsmi_get_gpu_activity"] == 1
    per_device = after["per_device"]
    assert isinstance(per_device, dict)
    assert set(per_device["amdsmi_get_gpu_activity"]) <= {"1", "2"}  # scenario indices
    assert "2" in per_device["amdsmi_get_gpu_activity"]


def test_bad_amd_commands_are_refused_and_change_nothing(node: SimulatedNode) -> None:
    with pytest.raises(SimCommandError, match="AMD reports no XIDs"):
        node.command({"op": "xid", "device": 1, "code": 79})
    with pytest.raises(SimCommandError, match="not an AMD GPU"):
        node.command({"op": "event", "device": 0, "type": "vm_fault"})
    with pytest.raises(SimCommandError, match="'type' must be one of"):
        node.command({"op": "event", "device": 1, "type": "meltdown"})
    with pytest.raises(SimCommandError, match="unknown reading 'sm_clock_mhz'"):
        node.command({"op": "set", "device": 1, "values": {"sm_clock_mhz": 1}})
    assert run_amd(node, 'out = A.amdsmi_get_gpu_activity(h[0])["gfx_activity"]') == 64


def test_cli_drives_amd_devices(node: SimulatedNode, capsys: pytest.CaptureFixture[str]) -> None:
    sock = str(node.socket_path)
    assert sim_cli(["sim", "event", "--socket", sock, "--device", "1", "--type",
                    "queue_eviction"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    # On an NVIDIA GPU `reset` is NVML's GPU reset (counters restart; see test_simulator_chaos).
    assert sim_cli(["sim", "reset", "--socket", sock, "--device", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert sim_cli(["sim", "reset-required", "--socket", sock, "--device", "1"]) == 1
    assert "is an AMD GPU" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("devices: [{model: X, vendor: intel}]\n", "devices[0].vendor: expected one of"),
        ("devices: [{model: X, vendor: amd, sm_clock_mhz: 1}]\n",
         "devices[0].sm_clock_mhz: unknown key 'sm_clock_mhz'"),
        ("devices: [{model: X, vendor: amd, unsupported: [nvmlDeviceGetName]}]\n",
         "unknown amdsmi function"),
        ("devices: [{model: X, vendor: amd}]\ntimeline: [{at: 1s, device: 0, xid: 79}]\n",
         "AMD GPUs report no XIDs"),
        ("devices: [{model: X}]\ntimeline: [{at: 1s, device: 0, event: {type: vm_fault}}]\n",
         "applies to AMD devices only"),
    ],
)
def test_amd_scenario_errors(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ScenarioError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        SimulatedNode.start(write_scenario(tmp_path, text))


def test_timeline_event_reaches_a_reader(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, """
        devices:
          - {vendor: amd, model: AMD Instinct MI300X}
        timeline:
          - {at: 1500ms, device: 0, event: {type: vm_fault, message: from the timeline}}
    """)
    with SimulatedNode.start(scenario, state_dir=tmp_path / "state") as amd_only:
        start = time.monotonic()
        seen = run_amd(amd_only, """
            E = A.AmdSmiEvtNotificationType
            r = A.AmdSmiEventReader(h[0], [E.VMFAULT])
            out = []
            while not out:
                try:
                    out = [e["message"] for e in r.read(3000)]
                except A.AmdSmiLibraryException:
                    break
        """)
        assert seen == ["from the timeline"]
        assert time.monotonic() - start < 60
        nvidia = run_client(amd_only, 'out = len(h)')
        assert nvidia == 0  # an AMD-only node: NVML initialises and lists no GPU
