"""Issue 28, section 2 (non-MIG): where the simulated node and the agent shared a reading of
nvml.h that nvml.h itself (or NVIDIA's own consumers, DCGM) contradicts. Each test drives the
simulated node as nvml.h says a driver behaves and checks the agent's device code (real pynvml,
the compiled library, a client process) reads it right; each fails on the old code.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from gpu_otel_agent.model.counters import CounterRestarts
from gpu_otel_agent.model.snapshot import Reading
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.test_nvml_findings import _AGENT as AGENT
from tests.unit.simulator.simhelpers import run_client, run_client_dict, started_node

pytestmark = pytest.mark.integration

SCENARIO = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    sm_active: 40
  - model: NVIDIA H100 80GB HBM3
    sm_active: 60
  - model: NVIDIA A100-SXM4-80GB
  - model: NVIDIA H100 80GB HBM3
    unsupported: [nvmlDeviceGetFieldValues]
  - model: NVIDIA A100-SXM4-80GB
    unsupported: [nvmlDeviceGetFieldValues]
"""

# The agent's own device code in the client (test_nvml_findings' prelude), plus rows().
_AGENT = AGENT + """
def rows(rs):
    return [[r.metric, r.value, dict(r.attributes)] for r in rs]
"""
# A GPM sample pair on GPU i, `gap` seconds apart: [nvmlReturn, value] of SM_UTIL, or the error.
_GPM = """
def gpm(i, gap=0.12):
    a, b = N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()
    try:
        N.nvmlGpmSampleGet(h[i], a)
        time.sleep(gap)
        N.nvmlGpmSampleGet(h[i], b)
        m = gpm_metrics(a, b, N.NVML_GPM_METRIC_SM_UTIL)[0]
        return [m.nvmlReturn, m.value]
    except N.NVMLError as e:
        return type(e).__name__
def wait(i):
    s = N.nvmlEventSetCreate()
    N.nvmlDeviceRegisterEvents(h[i], N.nvmlEventTypeXidCriticalError, s)
    return err(N.nvmlEventSetWait_v2, s, 1)
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    with started_node(tmp_path_factory.mktemp("divergences"), SCENARIO) as n:
        yield n


def _client(node: SimulatedNode, code: str) -> dict[str, object]:
    return run_client_dict(node, _AGENT + code)


def test_gpm_samples_closer_than_100ms_give_no_value(node: SimulatedNode) -> None:
    """nvml.h (nvmlGpmMetricsGet): the two samples "should be greater than 100ms" apart."""
    out = run_client(node, _GPM + 'out = {"close": gpm(0, 0), "apart": gpm(0, 0.15)}')
    assert out["close"][0] == 0 and math.isnan(out["close"][1])
    assert out["apart"] == [0, 40.0]


def test_first_gpm_read_waits_for_the_interval(node: SimulatedNode) -> None:
    """The agent's first GPM read came 4.5 ms after the probe's baseline sample."""
    before = node.stats()["calls"]
    out = _client(node, """
d = devices[0]
groups = d.probe()
first = rows(d.read("gpm"))  # at once, as the sampler does after a probe
time.sleep(0.15)
later = rows(d.read("gpm"))
out = {"gpm": "gpm" in groups, "first": first, "later": pick(later, "gpu.sm.utilization")}
""")
    after = node.stats()["calls"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert out == {"gpm": True, "first": [], "later": [0.4]}
    # the too-early read took no sample and computed nothing: one pair only
    assert after["nvmlGpmMetricsGet"] - before.get("nvmlGpmMetricsGet", 0) == 1


def test_chaos_reaches_gpm_and_stays_on_the_devices_named(node: SimulatedNode) -> None:
    """nvml.h documents the GPM calls' codes only as "Nonzero NVML_ERROR_? enum on error": chaos
    drew from an empty list and never failed them; and calls without a device handle (every
    GPU's nvmlGpmMetricsGet, event waits) failed on `--devices 0` for every GPU."""
    node.command({"op": "chaos", "rate": 1.0, "seed": 3, "devices": [0],
                  "functions": ["nvmlGpmMetricsGet", "nvmlEventSetWait_v2"]})
    try:
        chaos = run_client(node, _GPM + """
out = {"gpm": [gpm(0), gpm(1)], "wait": [wait(0), wait(1)]}
""")
        node.command({"op": "chaos", "off": True})
        node.command({"op": "fail", "device": 1, "function": "nvmlGpmMetricsGet",
                      "code": "UNKNOWN", "count": 1})
        targeted = run_client(node, _GPM + "out = [gpm(0), gpm(1), gpm(1)]")
    finally:
        node.command({"op": "chaos", "off": True})
        node.command({"op": "fail", "off": True})
    assert chaos == {"gpm": ["NVMLError_Unknown", [0, 60.0]],
                     "wait": ["NVMLError_Unknown", "NVMLError_Timeout"]}
    assert targeted == [[0, 40.0], "NVMLError_Unknown", [0, 60.0]]


def test_agent_gpm_under_chaos_on_one_gpu(node: SimulatedNode) -> None:
    """The agent under GPM faults on GPU 0: GPU 0's GPM values are absent (not stale, not
    turned off), GPU 1's keep arriving, and GPU 0's come back once the faults stop."""
    out = _client(node, """
for d in devices[:2]:
    d.probe()
command(SOCK, {"op": "chaos", "rate": 1.0, "devices": [0],
               "functions": ["nvmlGpmMetricsGet", "nvmlGpmSampleGet"]})
during = []
for _ in range(3):
    time.sleep(0.15)
    during.append([pick(rows(d.read("gpm")), "gpu.sm.utilization") for d in devices[:2]])
command(SOCK, {"op": "chaos", "off": True})
after = []
for _ in range(3):
    time.sleep(0.15)
    after.append(pick(rows(devices[0].read("gpm")), "gpu.sm.utilization"))
out = {"during": during, "after": after}
""")
    node.command({"op": "chaos", "off": True})
    assert out["during"] == [[[], [0.6]]] * 3
    after = out["after"]
    assert isinstance(after, list) and [0.4] in after  # back, once a clean pair was taken


def test_power_instant_and_one_second_average_differ(node: SimulatedNode) -> None:
    """nvml.h: field 186 is "Current GPU power"; field 185 and nvmlDeviceGetPowerUsage are
    "averaged over 1 sec interval" on Ampere (except GA100) and newer, instant on GA100 (where
    185 is not supported). The node served one figure for all three; hw.power is the instant
    one, and where only nvmlDeviceGetPowerUsage answers it is what nvml.h says that call is."""
    spike = {"power_w": 650, "power_average_w": 420}  # a spike the 1 s average has not caught
    for dev in range(5):
        node.command({"op": "set", "device": dev, "values": spike})
    try:
        out = _client(node, """
def fields(i):
    return [[v.nvmlReturn, v.value.uiVal] for v in N.nvmlDeviceGetFieldValues(
        h[i], [N.NVML_FI_DEV_POWER_INSTANT, N.NVML_FI_DEV_POWER_AVERAGE])]
out = {"fields": [fields(0), fields(2)],
       "usage": [N.nvmlDeviceGetPowerUsage(h[i]) for i in range(5)],
       "agent": [pick(rows((d.probe(), d.read("fast"))[1]), "hw.power") for d in devices]}
""")
    finally:
        for dev in range(5):  # the models' figure (models.py BASE), steady
            node.command({"op": "set", "device": dev,
                          "values": {"power_w": 60, "power_average_w": 60}})
    assert out["fields"] == [[[0, 650_000], [0, 420_000]],  # H100: instant, average
                             [[0, 650_000], [3, 0]]]  # A100 (GA100): no average field
    # the average, but on GA100 the instant power
    assert out["usage"] == [420_000, 420_000, 650_000, 420_000, 650_000]
    # the instant field; where no field answers, nvmlDeviceGetPowerUsage (vendor note)
    assert out["agent"] == [[650.0], [650.0], [650.0], [420.0], [650.0]]


def test_recovery_action_pending_before_the_agent_started(node: SimulatedNode) -> None:
    """Field 230 was read only on a recovery-action event; an action the driver asked for
    before the agent started (its event long gone) was never seen. Now read at registration."""
    node.command({"op": "set", "device": 1, "values": {"recovery_action": 2}})  # no event
    try:
        out = _client(node, """
import threading
from gpu_otel_agent.plugins.nvidia.event_sets import NvmlEventWatcher
got = {0: [], 1: []}
seen = threading.Event()
def emitter(i):
    def emit(batch):
        got[i].extend([e.kind, e.code, e.detail] for e in batch)
        seen.set()
    return emit
watchers = [NvmlEventWatcher(h[i], devices[i].identity.uuid, i) for i in (0, 1)]
for i, w in enumerate(watchers):
    w.start(emitter(i))
seen.wait(30)
deadline = time.monotonic() + 30
while not all(w.registered for w in watchers) and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.2)
for w in watchers:
    w.stop()
out = {"0": got[0], "1": got[1]}
""")
    finally:
        node.command({"op": "set", "device": 1, "values": {"recovery_action": 0}})
    assert out == {"0": [],  # nothing pending: nothing said
                   "1": [["recovery_action", 2, "pending when NVML events were registered"]]}


def test_replay_rollover_and_clock_event_counters_are_read(node: SimulatedNode) -> None:
    """Fields 95 (PCIe replay rollover) and 269-271 (clock-event reason time, ns) were never
    read; 269-271 by number, since pynvml <= 13.580.65 names 251-253 (power smoothing)."""
    values = {"pcie_replay_rollover": 3, "violation_sw_thermal_ns": 2e9,
              "violation_hw_thermal_ns": 3e9, "violation_hw_power_brake_ns": 4e9}
    node.command({"op": "set", "device": 0, "values": values})
    try:
        out = _client(node, """
d = devices[0]
d.probe()
rs = rows(d.read("slow"))
out = {"rollover": pick(rs, "gpu.pcie.replay_rollovers"),
       "time": {p: pick(rs, "gpu.violation.time", **{"gpu.violation.policy": p})
                for p in ("sw_thermal_slowdown", "hw_thermal_slowdown",
                          "hw_power_brake_slowdown")}}
""")
    finally:
        node.command({"op": "set", "device": 0, "values": dict.fromkeys(values, 0)})
    assert out["rollover"] == [3]
    time = out["time"]
    assert isinstance(time, dict)
    # integrated by the node while a clock-event reason is set: at least what was set
    assert time["sw_thermal_slowdown"][0] >= 2.0 and time["hw_thermal_slowdown"][0] >= 3.0
    assert time["hw_power_brake_slowdown"][0] >= 4.0


def test_remapped_rows_may_go_down_without_restarting_the_series(node: SimulatedNode) -> None:
    """nvml.h counts remaps that became inactive apart (nvmlRemappedRowsInfo_v2_t,
    NVML_FI_DEV_REMAPPED_ROWS_*_INACTIVE): the active count can drop. As a counter, a drop
    restarted the series (a reset); as an UpDownCounter it is just a lower value."""
    out = _client(node, """
d = devices[0]
d.probe()
seen = []
for rows_now in (5, 3):
    command(SOCK, {"op": "set", "device": 0, "values": {"remapped_rows_correctable": rows_now}})
    seen.append(pick(rows(d.read("slow")), "gpu.memory.row_remap.count",
                     **{"error.type": "corrected"}))
command(SOCK, {"op": "set", "device": 0, "values": {"remapped_rows_correctable": 0}})
out = {"seen": seen}
""")
    assert out["seen"] == [[5], [3]]
    restarts = CounterRestarts(0)
    for value in (5, 3):
        restarts.observe([Reading("gpu.memory.row_remap.count", value,
                                  (("error.type", "corrected"),))], value)
    assert restarts.restarts == 0


def test_field_values_are_dated_by_their_timestamp(node: SimulatedNode) -> None:
    """nvml.h nvmlFieldValue_t.timestamp: "CPU Timestamp of this value": a value the driver
    cached is older than the read. Readings were dated at the read."""
    node.command({"op": "set", "device": 0, "values": {"field_age_ms": 60_000}})
    try:
        out = _client(node, """
d = devices[0]
d.probe()
before = time.time_ns()
rs = d.read("fast")
field = [r.time_ns for r in rs if r.metric == "hw.power"]
call = [r.time_ns for r in rs if r.metric == "hw.gpu.utilization"]
out = {"before": before, "field": field, "call": call}
""")
    finally:
        node.command({"op": "set", "device": 0, "values": {"field_age_ms": 0}})
    before, (field,), (call,) = out["before"], out["field"], out["call"]  # type: ignore[misc]
    assert field < before - 30 * 10**9  # a minute old, as the driver said (half is plenty)
    assert call == 0  # a call's value has no time of its own: the group's read time
