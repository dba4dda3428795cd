"""NVML as nvml.h documents it, for the findings of issue 18: each test drives the simulated node
the way nvml.h says a driver behaves and checks the agent's own device code (through real pynvml
and the compiled library, in a client process) reads it right. Each fails on the old behaviour.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import client_env, run_client, run_client_dict, started_node

pytestmark = pytest.mark.integration

SCENARIO = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    memory_used_mib: 1000
  - model: Tesla T4
  - model: NVIDIA A100-SXM4-80GB
    unsupported: [nvmlDeviceGetFieldValues]
  - model: NVIDIA H100 80GB HBM3
timeline:
  - {at: 0.2s, device: 3, recovery: 2}
"""

_AGENT = """
from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
from gpu_otel_agent.simulation.node.control_client import command
SOCK = os.environ["GPU_SIM_SOCKET"]
backend = NvidiaBackend()
backend.open()
devices = backend.devices()
def readings(dev, group):
    d = devices[dev]
    d.probe()
    return [[r.metric, r.value, dict(r.attributes)] for r in d.read(group)]
def pick(rs, metric, **attrs):
    return [v for m, v, a in rs if m == metric and all(a.get(k) == x for k, x in attrs.items())]
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    with started_node(tmp_path_factory.mktemp("findings"), SCENARIO) as n:
        yield n


def _client(node: SimulatedNode, code: str) -> dict[str, object]:
    return run_client_dict(node, _AGENT + code)


def test_recovery_action_comes_from_its_field_not_event_data(node: SimulatedNode) -> None:
    out = _client(node, """
import threading
from gpu_otel_agent.plugins.nvidia.event_sets import NvmlEventWatcher
got, seen = [], threading.Event()
def emit(batch):
    got.extend(batch)
    seen.set()
raw_set = N.nvmlEventSetCreate()
N.nvmlDeviceRegisterEvents(h[0], N.nvmlEventTypeGpuRecoveryAction, raw_set)
watcher = NvmlEventWatcher(h[0], devices[0].identity.uuid, 0)
watcher.start(emit)
deadline = time.monotonic() + 30
while not watcher.registered and time.monotonic() < deadline:
    time.sleep(0.05)
reply = command(SOCK, {"op": "recovery", "device": 0, "action": 4})
seen.wait(30)
watcher.stop()
raw = N.nvmlEventSetWait_v2(raw_set, 5000)
field = N.nvmlDeviceGetFieldValues(h[0], [N.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])[0]
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # the timeline's entry, eventually
    timeline = N.nvmlDeviceGetFieldValues(h[3], [N.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])[0]
    if timeline.value.uiVal:
        break
    time.sleep(0.1)
out = {"reply": reply, "events": [[e.kind, e.code] for e in got],
       "raw": [raw.eventType, raw.eventData], "field": [field.nvmlReturn, field.value.uiVal],
       "timeline": timeline.value.uiVal}
""")
    reply = out["reply"]
    assert isinstance(reply, dict) and reply["ok"] is True and isinstance(reply["seq"], int)
    # nvml.h: eventData is 0 for any event but an XID; the action is the field's value.
    assert out["raw"] == [0x8000, 0]
    assert out["field"] == [0, 4]
    assert out["events"] == [["recovery_action", 4]]
    assert out["timeline"] == 2  # the scenario's timeline action reached device 3


@pytest.mark.harness  # the simulated node, not the agent
def test_sim_recovery_command_line(node: SimulatedNode) -> None:
    cli = [sys.executable, "-m", "gpu_otel_agent.cli", "sim", "recovery", "--device", "1",
           "--action", "7", "--socket", str(node.socket_path)]
    done = subprocess.run(cli, env=client_env(node), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = _client(node, """
v = N.nvmlDeviceGetFieldValues(h[1], [N.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])[0]
out = {"action": v.value.uiVal}
""")
    assert out == {"action": 7}
    bad = subprocess.run([*cli[:-4], "--action", "8", *cli[-2:]], env=client_env(node),
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode != 0 and "8" in bad.stderr


def test_row_remap_pending_on_ampere_and_none_on_turing(node: SimulatedNode) -> None:
    node.command({"op": "set", "device": 0, "values": {"remapped_rows_pending": 1}})
    out = _client(node, """
rows = {}
for i in (0, 1):
    try:
        rows[i] = list(N.nvmlDeviceGetRemappedRows(h[i]))
    except N.NVMLError as e:
        rows[i] = type(e).__name__
h100, t4 = readings(0, "slow"), readings(1, "slow")
out = {"rows": rows, "pending": pick(h100, "gpu.memory.row_remap.pending"),
       "t4": sorted({m for m, _, _ in t4 if "remap" in m})}
""")
    node.command({"op": "set", "device": 0, "values": {"remapped_rows_pending": 0}})
    assert out["rows"] == {"0": [0, 0, 1, 0], "1": "NVMLError_NotSupported"}
    assert out["pending"] == [1]
    assert out["t4"] == []  # nvml.h: row remapping is Ampere and newer


def test_clock_event_reasons_board_limit_and_reliability(node: SimulatedNode) -> None:
    node.command({"op": "set", "device": 0, "values": {"clocks_event_reasons": 0x600}})
    out = _client(node, """
rs = readings(0, "slow")
out = {r: pick(rs, "gpu.clock.throttle", **{"gpu.clock.throttle.reason": r})
       for r in ("board_limit", "reliability", "sw_power_cap")}
""")
    node.command({"op": "set", "device": 0, "values": {"clocks_event_reasons": 1}})
    assert out == {"board_limit": [1], "reliability": [1], "sw_power_cap": [0]}


def test_unknown_pstate_is_absent(node: SimulatedNode) -> None:
    node.command({"op": "set", "device": 0, "values": {"pstate": 32}})
    try:
        out = _client(node, """
unknown = pick(readings(0, "slow"), "gpu.performance_state")
command(SOCK, {"op": "set", "device": 0, "values": {"pstate": 2}})
out = {"unknown": unknown, "known": pick(readings(0, "slow"), "gpu.performance_state")}
""")
    finally:
        node.command({"op": "set", "device": 0, "values": {"pstate": 0}})
    assert out == {"unknown": [], "known": [2]}


def test_memory_usage_is_v2_used_excluding_reserved(node: SimulatedNode) -> None:
    out = _client(node, """
m2 = N.nvmlDeviceGetMemoryInfo(h[0], N.nvmlMemory_v2)
rs = readings(0, "fast")
out = {"usage": pick(rs, "hw.gpu.memory.usage"), "reserved": pick(rs, "gpu.memory.reserved"),
       "v2": [m2.used, m2.reserved]}
""")
    assert out["usage"] == [1000 * 2**20] and out["v2"][0] == 1000 * 2**20  # type: ignore[index]
    assert out["reserved"] == [out["v2"][1]]  # type: ignore[index]


def test_temperature_through_the_replacement_call(node: SimulatedNode) -> None:
    """Device 2 serves no field values, so temperature comes from a call: the replacement."""
    before = node.stats()["calls"]
    out = _client(node, """
rs = [readings(2, "fast") for _ in range(3)]
out = {"temp": [pick(r, "hw.temperature", **{"hw.sensor_location": "gpu"}) for r in rs]}
""")
    after = node.stats()["calls"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert out["temp"] == [[34], [34], [34]]
    assert after["nvmlDeviceGetTemperatureV"] > before.get("nvmlDeviceGetTemperatureV", 0)
    assert after.get("nvmlDeviceGetTemperature", 0) == before.get("nvmlDeviceGetTemperature", 0)


OLD_DRIVER = """
driver_version: "470.57.02"
missing_symbols: [nvmlDeviceGetTemperatureV, nvmlDeviceGetMemoryInfo_v2]
devices:
  - model: NVIDIA A100-SXM4-80GB
    unsupported: [nvmlDeviceGetFieldValues]
"""


def test_older_driver_falls_back_to_v1_memory_and_the_deprecated_temperature(
        tmp_path: os.PathLike[str]) -> None:
    from pathlib import Path

    with started_node(Path(tmp_path), OLD_DRIVER) as old:
        out = run_client(old, _AGENT + """
rs = readings(0, "fast")
out = {"temp": pick(rs, "hw.temperature"), "usage": pick(rs, "hw.gpu.memory.usage"),
       "limit": pick(rs, "hw.gpu.memory.limit")}
""", timeout=120)
    assert out["temp"] == [34]  # the deprecated call, where its replacement is missing
    # v1's used includes the reserve (nvml.h nvmlMemory_t): memory in use all the same, sent
    # rather than leaving usage (and so hw.gpu.memory.utilization) absent on older drivers.
    assert out["limit"] == [81920 * 2**20]
    assert len(out["usage"]) == 1 and 0 < out["usage"][0] <= out["limit"][0]
