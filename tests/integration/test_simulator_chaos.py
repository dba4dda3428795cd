"""Faults of the simulated node through real pynvml: chaos, targeted fail, node states."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_otel_agent.simulation.node import SimCommandError, SimulatedNode
from gpu_otel_agent.simulation.nvidia import nvml_returns
from tests.unit.simulator.simhelpers import run_client, write_scenario

pytestmark = [pytest.mark.integration, pytest.mark.harness]  # tests the simulated node

SCENARIO = """
devices:
  - model: NVIDIA H100 80GB HBM3
    power_w: 500
    pcie_counter_bits: 32
    pcie_tx_kb_s: 1000
    pcie_replay_rollover: 3
  - model: NVIDIA H100 80GB HBM3
    power_w: 400
"""

FN = ["nvmlDeviceGetPowerUsage"]
SEND = "from gpu_otel_agent.simulation.node.control_client import send\n"
# A client calls these in this order; the pattern of errors is its "fault fingerprint".
FINGERPRINT = """
seq = []
for i in range(300):
    try:
        N.nvmlDeviceGetPowerUsage(h[i % 2])
        seq.append(0)
    except N.NVMLError as e:
        seq.append(e.value)
out = seq
"""


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    with SimulatedNode.start(write_scenario(tmp_path, SCENARIO), state_dir=tmp_path / "st") as n:
        yield n


def _chaos(node: SimulatedNode) -> dict[str, Any]:
    stats = node.stats()["chaos"]
    assert isinstance(stats, dict)
    return stats


def test_targeted_fail_counts_then_clears(node: SimulatedNode) -> None:
    node.command({"op": "fail", "device": 0, "function": "nvmlDeviceGetPowerUsage",
                  "code": 999, "count": 3})
    out = run_client(node, """
out = [err(N.nvmlDeviceGetPowerUsage, h[0]) for _ in range(5)]
out.append(err(N.nvmlDeviceGetPowerUsage, h[1]))
""")
    assert out == ["NVMLError_Unknown"] * 3 + ["ok", "ok", "ok"]
    node.command({"op": "fail", "device": 1, "function": "nvmlDeviceGetPowerUsage",
                  "code": "NO_PERMISSION"})
    assert run_client(node, "out = [err(N.nvmlDeviceGetPowerUsage, h[1]) for _ in range(4)]") \
        == ["NVMLError_NoPermission"] * 4
    node.command({"op": "fail", "device": 1, "off": True})
    assert run_client(node, "out = err(N.nvmlDeviceGetPowerUsage, h[1])") == "ok"
    injected = _chaos(node)["injected"]["nvmlDeviceGetPowerUsage"]
    assert injected == {"NVML_ERROR_UNKNOWN": 3, "NVML_ERROR_NO_PERMISSION": 4}


def test_targeted_field_code_leaves_other_fields(node: SimulatedNode) -> None:
    node.command({"op": "fail", "device": 0, "field": 83, "code": "TIMEOUT", "count": 1})
    out = run_client(node, """
out = []
for _ in range(2):
    vals = N.nvmlDeviceGetFieldValues(h[0], [83, 197])
    out.append([v.nvmlReturn for v in vals])
""")
    assert out == [[10, 0], [0, 0]]
    assert _chaos(node)["field_injected"] == {"83": {"NVML_ERROR_TIMEOUT": 1}}


def test_chaos_is_reproducible_by_seed_and_counted(node: SimulatedNode) -> None:
    node.command({"op": "chaos", "rate": 0.2, "seed": 7, "functions": FN})
    first = run_client(node, FINGERPRINT)
    second = run_client(node, FINGERPRINT)  # another client process, same calls
    assert first == second
    errors = [c for c in first if c]
    assert errors, "rate 0.2 over 300 calls injected nothing"
    documented = {nvml_returns.code_values()[c]
                  for c in nvml_returns.injectable("nvmlDeviceGetPowerUsage")}
    assert set(errors) <= documented
    stats = _chaos(node)
    assert stats["injected"]["nvmlDeviceGetPowerUsage"]["NVML_ERROR_UNKNOWN"] == 2 * len(errors)
    node.command({"op": "chaos", "rate": 0.2, "seed": 8, "functions": FN})
    assert run_client(node, FINGERPRINT) != first
    node.command({"op": "chaos", "off": True})
    assert not any(run_client(node, FINGERPRINT))


def test_chaos_codes_functions_devices_and_slow(node: SimulatedNode) -> None:
    node.command({"op": "chaos", "rate": 1.0, "codes": ["TIMEOUT", "NO_PERMISSION"],
                  "functions": FN, "devices": [0]})
    out = run_client(node, """
pw0 = [err(N.nvmlDeviceGetPowerUsage, h[0]) for _ in range(20)]
pw1 = err(N.nvmlDeviceGetPowerUsage, h[1])
util = err(N.nvmlDeviceGetUtilizationRates, h[0])
out = {"pw0": sorted(set(pw0)), "pw1": pw1, "util": util}
""")
    assert out == {"pw0": ["NVMLError_NoPermission", "NVMLError_Timeout"], "pw1": "ok",
                   "util": "ok"}
    # nvml.h documents no whole-call fault for nvmlDeviceGetFieldValues: under `documented`
    # the call succeeds and each field draws its own nvmlReturn.
    node.command({"op": "chaos", "rate": 1.0, "functions": ["nvmlDeviceGetFieldValues"]})
    fields = run_client(node, "out = [v.nvmlReturn for v in "
                              "N.nvmlDeviceGetFieldValues(h[1], [83, 197, 198])]")
    assert fields == [999, 999, 999]
    node.command({"op": "chaos", "rate": 0.0, "slow_ms": {"rate": 1.0, "ms": 1},
                  "functions": ["nvmlDeviceGetPowerUsage"]})
    run_client(node, "out = [N.nvmlDeviceGetPowerUsage(h[0]) for _ in range(5)]")
    assert _chaos(node)["slow"] == {"nvmlDeviceGetPowerUsage": 5}
    with pytest.raises(SimCommandError, match="rate"):
        node.command({"op": "chaos", "rate": -1})


def test_driver_reload(node: SimulatedNode) -> None:
    out = run_client(node, SEND + """
import ctypes
lib = ctypes.CDLL("libnvidia-ml.so.1")
class Up(ctypes.Structure):
    _fields_ = [("uptime", ctypes.c_uint)]
def uptime(i):
    u = Up()
    assert lib.nvmlDeviceGetGpuUptime_v1(h[i], ctypes.byref(u)) == 0
    return u.uptime
time.sleep(1.2)
es = N.nvmlEventSetCreate()
N.nvmlDeviceRegisterEvents(h[0], N.nvmlEventTypeXidCriticalError, es)
before = {"energy": N.nvmlDeviceGetTotalEnergyConsumption(h[0]), "uptime": uptime(0)}
send(os.environ["GPU_SIM_SOCKET"], {"op": "driver_reload"})
stale = [err(N.nvmlDeviceGetPowerUsage, h[0]), err(N.nvmlDeviceGetCount),
         err(N.nvmlEventSetWait_v2, es, 10)]
N.nvmlShutdown()
N.nvmlInit()
h = [N.nvmlDeviceGetHandleByIndex(i) for i in range(N.nvmlDeviceGetCount())]
after = {"energy": N.nvmlDeviceGetTotalEnergyConsumption(h[0]), "uptime": uptime(0)}
old_set = err(N.nvmlEventSetWait_v2, es, 10)
out = {"before": before, "stale": stale, "after": after, "old_set": old_set}
""")
    assert out["stale"] == ["NVMLError_Uninitialized"] * 3
    assert out["before"]["uptime"] >= 1 and out["after"]["uptime"] < out["before"]["uptime"]
    assert out["after"]["energy"] < out["before"]["energy"]
    assert out["old_set"] == "NVMLError_Unknown"
    assert _chaos(node)["driver_generation"] == 1


def test_gpu_reset_and_reset_required(node: SimulatedNode) -> None:
    node.command({"op": "ecc", "device": 0, "type": "single_bit"})
    before = run_client(node, "out = N.nvmlDeviceGetTotalEccErrors(h[0], 0, 0)")
    assert before == 1
    node.command({"op": "reset_required", "device": 0})
    read = """
out = {"rr": err(N.nvmlDeviceGetPowerUsage, h[0]), "other": err(N.nvmlDeviceGetPowerUsage, h[1])}
"""
    assert run_client(node, read) == {"rr": "NVMLError_ResetRequired", "other": "ok"}
    node.command({"op": "reset", "device": 0})
    out = run_client(node, """
out = {"vol": N.nvmlDeviceGetTotalEccErrors(h[0], 0, 0),
       "agg": N.nvmlDeviceGetTotalEccErrors(h[0], 0, 1),
       "power": err(N.nvmlDeviceGetPowerUsage, h[0])}
""")
    assert out == {"vol": 0, "agg": 1, "power": "ok"}


def test_pcie_counters_wrap_and_rollover_is_served(node: SimulatedNode) -> None:
    # 300 kB below the 32-bit wrap at 1 MB/s: the counter wraps a moment later.
    out = run_client(node, SEND + """
send(os.environ["GPU_SIM_SOCKET"], {"op": "set", "device": 0,
                                    "values": {"pcie_tx_bytes": 2**32 - 300_000}})
seen = []
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    v = N.nvmlDeviceGetFieldValues(h[0], [N.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 95])
    seen.append((v[0].value.ullVal, v[1].nvmlReturn, v[1].value.ullVal))
    if len(seen) > 1 and seen[-1][0] < seen[-2][0]:
        break
    time.sleep(0.05)
out = seen
""")
    tx = [s[0] for s in out]
    assert all(t < 2**32 for t in tx)
    assert any(b < a for a, b in itertools.pairwise(tx)), "never wrapped"
    assert {(s[1], s[2]) for s in out} == {(0, 3)}
