"""The AMD backend against the simulated libamd_smi.so serving MI210, MI250X and MI300X as those
parts report: sentinels through SUCCESS, per-ASIC tables, reset-time errors, HIP processes.

Each test runs the real backend (the real ``amdsmi`` package, ctypes, the compiled library) in
a client process and compares what it reads with what the scenario set.
"""

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

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import client_env, write_scenario

pytestmark = pytest.mark.integration

SCENARIO = """
devices:
  - {vendor: amd, model: AMD Instinct MI300X, power_w: 600, utilization_gpu: 90}
  - {vendor: amd, model: AMD Instinct MI210, power_w: 250}
  - {vendor: amd, model: AMD Instinct MI250X, power_w: 480}
  - {vendor: amd, model: AMD Instinct MI250X, power_w: 480}
  - {vendor: amd, model: AMD Instinct MI300X, power_w: null,
     unsupported: [amdsmi_get_gpu_metrics_info]}
"""
MI300X, MI210, GCD0, GCD1, MI300X_NO_TABLE = range(5)

_PRELUDE = """
import json, os, sys, time
from gpu_otel_agent.plugins.amd.backend import AmdBackend
from gpu_otel_agent.plugins.amd.device import AmdDevice
from gpu_otel_agent.plugins.amd.processes import amd_process_lookup
backend = AmdBackend()
backend.open()
devs = backend.devices()
def rd(dev, group):
    got = sorted(dev.read(group), key=lambda r: (r.metric, r.attributes))
    return [[r.metric, dict(r.attributes), r.value] for r in got]
def send_node(req):
    from gpu_otel_agent.simulation.node.control_client import send
    send(os.environ["GPU_SIM_SOCKET"], req)
def metric(readings, name, **attrs):
    return [v for m, a, v in readings if m == name and all(a.get(k) == x for k, x in attrs.items())]
"""


def run_backend(node: SimulatedNode, code: str, timeout: float = 60) -> Any:
    script = _PRELUDE + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", script], env=client_env(node),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    with SimulatedNode.start(write_scenario(tmp_path, SCENARIO), state_dir=tmp_path / "s") as n:
        yield n


def test_all_ones_through_success_are_absent_not_summed(node: SimulatedNode) -> None:
    out = run_backend(node, f"""
        import amdsmi as A
        h = devs[{MI210}].handle
        links = A.amdsmi_get_link_metrics(h)
        out = {{}}
        out["raw"] = [links["num_links"], links["links"][0]["read"]]
        out["power_info"] = A.amdsmi_get_power_info(devs[{MI300X_NO_TABLE}].handle)["socket_power"]
        for d in devs:
            d.probe()
        out["mi210_xgmi"] = metric(rd(devs[{MI210}], "slow"), "gpu.xgmi.io")
        out["no_table_power"] = metric(rd(devs[{MI300X_NO_TABLE}], "fast"), "hw.power")
        out["mi300_xgmi"] = metric(rd(devs[{MI300X}], "slow"), "gpu.xgmi.io")
    """)
    # What amdsmi hands over on a part without XGMI: SUCCESS, 8 links, all ones.
    assert out["raw"] == [8, 0xFFFF_FFFF_FFFF_FFFF]
    assert out["power_info"] == 0xFFFF_FFFF_FFFF_FFFF  # newer libraries' "no power"
    assert out["mi210_xgmi"] == []  # not 8 x 2^64 KB = 1.5e23 bytes
    assert out["no_table_power"] == []  # not 1.8e19 W
    assert len(out["mi300_xgmi"]) == 2 and all(v < 2**60 for v in out["mi300_xgmi"])


def test_each_asic_serves_its_table_and_power_belongs_to_the_package(node: SimulatedNode) -> None:
    out = run_backend(node, f"""
        import amdsmi as A
        out = {{"rev": [], "power": [], "clock": [], "residency": []}}
        for d in devs[:4]:
            import ctypes
            t = A.amdsmi_wrapper.amdsmi_gpu_metrics_t()
            A.amdsmi_wrapper.amdsmi_get_gpu_metrics_info(d.handle, ctypes.byref(t))
            out["rev"].append(t.common_header.content_revision)
            d.probe()
            fast = rd(d, "fast")
            out["power"].append(metric(fast, "hw.power"))
            gfx = {{"gpu.clock.domain": "graphics"}}
            out["clock"].append(metric(fast, "gpu.clock.frequency", **gfx))
        try:
            A.amdsmi_get_violation_status(devs[{MI210}].handle)
            out["violation"] = "ok"
        except A.AmdSmiLibraryException as e:
            out["violation"] = e.get_error_code()
    """)
    assert out["rev"] == [6, 3, 3, 3]  # MI300X v1.6 (current PMFW), MI200 v1.3
    # MI250X: the package's power on its first GCD, nothing (not 0 W) on the sibling.
    assert out["power"] == [[600], [250], [480], []]
    assert all(len(c) == 1 and c[0] > 0 for c in out["clock"])  # one gfx clock on v1.3 too
    assert out["violation"] == 2  # no residency fields in v1.3: NOT_SUPPORTED


def test_a_probe_during_a_reset_costs_no_metric_for_good(node: SimulatedNode) -> None:
    out = run_backend(node, f"""
        send_node({{"op": "reset", "device": {MI300X}, "ms": 1500, "errno": "EPERM"}})
        now = [0.0]
        d = devs[{MI300X}]
        d = AmdDevice(backend._smi, d.handle, d.identity, clock=lambda: now[0])
        out = {{"groups": sorted(d.probe()), "during": metric(rd(d, "fast"), "hw.power")}}
        time.sleep(2.0)  # the reset is over
        out["before_due"] = metric(rd(d, "fast"), "hw.power")
        now[0] = 1000.0  # past the retry back-off
        out["after"] = metric(rd(d, "fast"), "hw.power")
        out["slow_after"] = metric(rd(d, "slow"), "gpu.power.limit")
    """)
    assert out["groups"] == ["fast", "processes", "slow"]  # deferred, not dropped
    assert out["during"] == [] and out["before_due"] == []
    assert out["after"] == [600]
    assert out["slow_after"] == [750]


def test_busy_while_sampling_is_one_absent_cycle(node: SimulatedNode) -> None:
    out = run_backend(node, f"""
        import subprocess
        d = devs[{MI300X}]
        d.probe()
        out = {{"before": metric(rd(d, "fast"), "hw.power")}}
        # The read right after the command is inside a 3 s reset; the one after 3.5 s past it.
        send_node({{"op": "reset", "device": {MI300X}, "ms": 3000, "errno": "EBUSY"}})
        out["during"] = metric(rd(d, "fast"), "hw.power")
        time.sleep(3.5)
        out["after"] = metric(rd(d, "fast"), "hw.power")
    """)
    assert out == {"before": [600], "during": [], "after": [600]}


def test_violation_status_stays_off_the_cycle_and_throttle_still_shows(
        node: SimulatedNode) -> None:
    node.command({"op": "set", "device": MI300X, "values": {"throttle_ppt": 1}})
    out = run_backend(node, f"""
        import amdsmi as A
        t = time.monotonic(); A.amdsmi_get_violation_status(devs[{MI300X}].handle)
        out = {{"call_s": time.monotonic() - t}}
        d = devs[{MI300X}]
        d.probe()
        reads = []
        for _ in range(3):
            time.sleep(0.3)
            slow = rd(d, "slow")
            reads.append([metric(slow, "gpu.clock.throttle", **{{"gpu.clock.throttle.reason": r}})
                          for r in ("ppt_power", "hbm_thermal")])
        out["ppt"] = [r[0] for r in reads]
        out["hbm"] = reads[-1][1]
    """)
    assert out["call_s"] >= 0.09  # the simulated library sleeps inside, as amdsmi does
    assert out["ppt"][-1] == [1] and out["hbm"] == [0]
    per_device = node.stats()["per_device"]
    assert isinstance(per_device, dict)
    # One direct call above; the agent's probe and three slow reads made none.
    assert per_device["amdsmi_get_violation_status"] == {str(MI300X): 1}


def test_ecc_with_ras_off_energy_backwards_and_process_names(node: SimulatedNode) -> None:
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        node.command({"op": "set", "device": MI210, "values": {"ras_enabled": 0}})
        node.command({"op": "proc_add", "device": MI300X, "pid": sleeper.pid,
                      "used_memory_mib": 64})
        out = run_backend(node, f"""
            for d in devs:
                d.probe()
            out = {{"ecc_off": metric(rd(devs[{MI210}], "slow"), "hw.errors"),
                   "ecc_on": metric(rd(devs[{MI300X}], "slow"), "hw.errors")}}
            time.sleep(0.5)
            e1 = metric(rd(devs[{MI300X}], "fast"), "hw.energy")
            send_node({{"op": "set", "device": {MI300X}, "values": {{"energy_uj": 1000}}}})
            e2 = metric(rd(devs[{MI300X}], "fast"), "hw.energy")
            time.sleep(0.5)
            e3 = metric(rd(devs[{MI300X}], "fast"), "hw.energy")
            out["energy"] = [e1, e2, e3]
            import amdsmi as A
            out["raw_name"] = A.amdsmi_get_gpu_process_list(devs[{MI300X}].handle)[0]["name"]
            lookup = amd_process_lookup(backend._smi, {{d.identity.uuid: d.handle for d in devs}})
            out["names"] = [p.executable for p in lookup.processes_on(devs[{MI300X}].identity.uuid)]
        """)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert out["ecc_off"] == []  # SUCCESS 0/0/0 with RAS off is not "no errors"
    assert sorted(out["ecc_on"]) == [0, 0]  # corrected, uncorrected (deferred counted in it)
    e1, e2, e3 = (v[0] for v in out["energy"])
    assert e1 > 0.001 and e2 >= e1 and e3 > e2, out["energy"]  # restarted; the series did not
    assert out["raw_name"].endswith("/sleep")  # newer ROCm: the executable's path
    assert out["names"] == ["sleep"]


def test_energy_in_2_to_the_minus_16_joules_and_no_65_ghz_clock(node: SimulatedNode) -> None:
    """rocm_smi reports the energy resolution as 15.3 uJ (the counter counts 2^-16 J, 15.2588
    uJ: 0.27 % apart); amdsmi_get_clock_info copies an N/A uint16 table clock (MI300: clocks
    per XCC) into its uint32 as 0xFFFF with SUCCESS."""
    node.command({"op": "set", "device": MI300X, "values": {"energy_uj": 1e12, "power_w": 0}})
    out = run_backend(node, f"""
        import amdsmi as A
        from gpu_otel_agent.plugins.amd import readings
        h = devs[{MI300X}].handle
        e = A.amdsmi_get_energy_count(h)
        out = {{"resolution": e["counter_resolution"], "count": e["energy_accumulator"],
               "gfx_raw": A.amdsmi_get_clock_info(h, A.AmdSmiClkType.GFX)["clk"],
               "gfx": [r.value for r in readings._clock("GFX", "graphics")(A, h)],
               "video": [r.value for r in readings._clock("VCLK0", "video")(A, h)],
               "memory": [r.value for r in readings._clock("MEM", "memory")(A, h)],
               "energy": [r.value for r in readings._energy(
                   readings.MonotonicCounter())(A, h)]}}
    """)
    assert out["resolution"] == pytest.approx(15.3)
    assert out["count"] == int(1e12 * 65536 / 1e6)
    assert out["energy"] == [pytest.approx(1e6, rel=1e-6)]  # J; 15.3 would give 1.0027e6
    assert out["gfx_raw"] == 0xFFFF and out["gfx"] == [] and out["video"] == []
    assert out["memory"] and out["memory"][0] < 1e10  # a real clock still reads


def test_ras_off_answers_not_supported_and_exports_no_errors(node: SimulatedNode) -> None:
    """With RAS off amdgpu has no ras/features file: amdsmi_get_gpu_ecc_enabled answers
    NOT_SUPPORTED while the total count answers SUCCESS 0/0/0. hw.errors is absent, not 0."""
    node.command({"op": "set", "device": MI210, "values": {"ras_enabled": 0}})
    out = run_backend(node, f"""
        import amdsmi as A
        h = devs[{MI210}].handle
        try:
            A.amdsmi_get_gpu_ecc_enabled(h)
            out = {{"enabled": "ok"}}
        except A.AmdSmiLibraryException as e:
            out = {{"enabled": e.get_error_code()}}
        out["total"] = A.amdsmi_get_gpu_total_ecc_count(h)
        devs[{MI210}].probe()
        out["errors"] = metric(rd(devs[{MI210}], "slow"), "hw.errors")
    """)
    assert out["enabled"] == 2
    assert [out["total"][k] for k in ("correctable_count", "uncorrectable_count",
                                      "deferred_count")] == [0, 0, 0]
    assert out["errors"] == []


def test_mi200_throttle_reasons_from_the_status_bits_of_its_v13_table(
    node: SimulatedNode
) -> None:
    """MI200's v1.3 table has no residency accumulators but aldebaran fills
    indep_throttle_status: the agent reports throttling from what the table has."""
    node.command({"op": "set", "device": MI210, "values": {"throttle_ppt": 1}})
    out = run_backend(node, f"""
        d = devs[{MI210}]
        d.probe()
        out = {{r: metric(rd(d, "slow"), "gpu.clock.throttle",
                          **{{"gpu.clock.throttle.reason": r}})
               for r in ("ppt_power", "socket_thermal", "hbm_thermal", "vr_thermal", "prochot")}}
    """)
    assert out == {"ppt_power": [1], "socket_thermal": [0], "hbm_thermal": [0],
                   "vr_thermal": [0], "prochot": [0]}


def test_hip_process_is_never_zero_percent_and_shows_cu_occupancy(node: SimulatedNode) -> None:
    hip = subprocess.Popen(["sleep", "600"])
    drm = subprocess.Popen(["sleep", "600"])
    try:
        node.command({"op": "proc_add", "device": MI300X, "pid": hip.pid,
                      "used_memory_mib": 1000, "sm_util": 80})
        node.command({"op": "proc_add", "device": MI300X, "pid": drm.pid,
                      "used_memory_mib": 100, "sm_util": 30, "type": "graphics"})
        out = run_backend(node, f"""
            import amdsmi as A
            d = devs[{MI300X}]
            d.probe()
            d.read_processes()
            time.sleep(1.2)
            got = {{p.pid: [dict(p.utilization), p.compute_unit_occupancy]
                    for p in d.read_processes()}}
            raw = {{p["pid"]: p["engine_usage"]["gfx"]
                    for p in A.amdsmi_get_gpu_process_list(d.handle)}}
            out = {{"got": got, "raw": raw}}
        """)
    finally:
        for p in (hip, drm):
            p.kill()
            p.wait()
    # The GPU is busy (90 %), the HIP process's fdinfo engine time is 0 ns, as on a real MI300X.
    assert out["raw"][str(hip.pid)] == 0 and out["raw"][str(drm.pid)] > 0
    hip_util, hip_cu = out["got"][str(hip.pid)]
    drm_util, _ = out["got"][str(drm.pid)]
    assert hip_util == {}  # absent, not 0 %
    # rocm_smi's integer percentage of the CUs (ROCm 7.0, the node's default library)
    assert hip_cu == pytest.approx(round(0.8 * 304) * 100 // 304 / 100)
    assert drm_util["general"] == pytest.approx(0.30, abs=0.1)


@pytest.mark.parametrize(("rocm", "raw"), [("7.0", 49), ("7.12", 149)])
def test_cu_occupancy_is_a_percentage_or_a_count_as_the_library_reports_it(
    tmp_path: Path, rocm: str, raw: int
) -> None:
    """rocm_smi turned KFD's CU count into a percentage (rocm_smi_kfd.cc at 0ceca28, rocm-smi-lib
    at 1b1610f); the ROCm 7.12 rework reports the count (rocm-systems 0c348d2). Either way the
    agent exports the fraction of the device's CUs: 149 of 304 CUs is 49 %, not 149 / 304 of
    a percentage, nor 49 / 304 (what the agent made of a percentage before)."""
    hip = subprocess.Popen(["sleep", "600"])
    text = (f"amd_rocm_version: '{rocm}'\n"
            "devices:\n  - {vendor: amd, model: AMD Instinct MI300X}\n")
    try:
        with SimulatedNode.start(write_scenario(tmp_path, text), state_dir=tmp_path / "s") as n:
            n.command({"op": "proc_add", "device": 0, "pid": hip.pid, "used_memory_mib": 64,
                       "sm_util": 49})
            out = run_backend(n, """
                import amdsmi as A
                d = devs[0]
                d.probe()
                out = {"raw": A.amdsmi_get_gpu_process_list(d.handle)[0]["cu_occupancy"],
                       "got": [p.compute_unit_occupancy for p in d.read_processes()]}
            """)
    finally:
        hip.kill()
        hip.wait()
    assert out["raw"] == raw
    assert out["got"] == [pytest.approx(149 / 304, abs=0.01)]


def test_cli_reset_takes_an_errno(node: SimulatedNode) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpu_otel_agent.simulation.sim_commands", "sim", "reset",
         "--device", str(MI210), "--ms", "200", "--errno", "EBUSY",
         "--socket", str(node.socket_path)],
        capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout)
    assert reply["ok"] is True and reply["node"]["pid"] == node.pid  # it names whom it reached
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the post-reset event ends the window
        if node.stats().get("amd_event_seq", 0) >= 2:
            break
        time.sleep(0.05)
    assert node.stats()["amd_event_seq"] >= 2
