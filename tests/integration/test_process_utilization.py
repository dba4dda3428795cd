"""Per-process utilization as nvml.h documents nvmlDeviceGetProcessUtilization, read by the agent
and by nvitop (a peer, the independent reference) on the same simulated node.

nvml.h: "One utilization sample structure is returned per process running, that had some
non-zero utilization during the last sample period"; samples newer than lastSeenTimeStamp only;
NVML_ERROR_NOT_FOUND when there are none. nvitop sets every listed process to 0 and overlays the
samples of the last second, newest last.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario

pytestmark = pytest.mark.integration

SCENARIO = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
  - model: NVIDIA H100 80GB HBM3
"""

# Client code: the agent's own sampler on device `dev`, attached like the agent is.
_AGENT = """
from gpu_otel_agent.plugins.nvidia.processes import ProcessSampler
from gpu_otel_agent.simulation.node.control_client import command
SOCK = os.environ["GPU_SIM_SOCKET"]
def sampler(dev):
    s = ProcessSampler(h[dev], lambda name, fn, *a: fn(*a))
    assert s.probe()
    return s
def agent_util(s):
    return {str(p.pid): dict(p.utilization).get("general") for p in s.read()}
def nvitop_util(dev):
    from nvitop import Device
    return {str(pid): p.gpu_sm_utilization() for pid, p in Device(dev).processes().items()}
def newest(dev, last=0):
    try:
        samples = N.nvmlDeviceGetProcessUtilization(h[dev], last)
    except N.NVMLError_NotFound:
        return {}
    best = {}
    for x in samples:
        if x.pid not in best or x.timeStamp > best[x.pid][0]:
            best[x.pid] = (x.timeStamp, x.smUtil)
    return {str(pid): sm for pid, (_, sm) in best.items()}
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("procutil")
    with SimulatedNode.start(write_scenario(tmp, SCENARIO), state_dir=tmp / "state") as n:
        yield n


@pytest.fixture
def sleepers() -> Iterator[list[int]]:
    """Live processes to stand for GPU processes (nvitop lists only processes that exist)."""
    procs = [subprocess.Popen(["sleep", "300"]) for _ in range(8)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def _client(node: SimulatedNode, code: str) -> dict[str, object]:
    out = run_client(node, _AGENT + code, timeout=120)
    assert isinstance(out, dict)
    return out


@pytest.mark.harness  # the simulated node, not the agent
def test_sim_serves_no_sample_for_idle_process_and_not_found_when_none(
        node: SimulatedNode, sleepers: list[int]) -> None:
    busy, idle = sleepers[:2]
    node.command({"op": "proc_add", "device": 1, "pid": busy, "used_memory_mib": 900,
                  "sm_util": 60})
    node.command({"op": "proc_add", "device": 1, "pid": idle, "used_memory_mib": 500,
                  "sm_util": 0})
    try:
        out = _client(node, """
pids = {x.pid for x in N.nvmlDeviceGetProcessUtilization(h[1], 0)}
latest = max(x.timeStamp for x in N.nvmlDeviceGetProcessUtilization(h[1], 0))
try:
    N.nvmlDeviceGetProcessUtilization(h[1], latest)
    after = "ok"
except N.NVMLError_NotFound:
    after = "NotFound"
listed = {p.pid for p in N.nvmlDeviceGetComputeRunningProcesses(h[1])}
out = {"sampled": sorted(pids), "listed": sorted(listed), "after": after}
""")
    finally:
        for pid in (busy, idle):
            node.command({"op": "proc_rm", "pid": pid})
    assert out["listed"] == sorted([busy, idle])  # both run on the GPU...
    assert out["sampled"] == [busy]  # ...but the idle one has no utilization sample
    assert out["after"] == "NotFound"


def test_idle_process_is_zero_in_agent_and_nvitop(node: SimulatedNode,
                                                  sleepers: list[int]) -> None:
    busy, idle = sleepers[:2]
    node.command({"op": "proc_add", "device": 0, "pid": busy, "used_memory_mib": 900,
                  "sm_util": 60})
    node.command({"op": "proc_add", "device": 0, "pid": idle, "used_memory_mib": 500,
                  "sm_util": 0})
    try:
        out = _client(node, f"""
s = sampler(0)
first = {{"agent": agent_util(s), "nvitop": nvitop_util(0)}}
command(SOCK, {{"op": "proc_add", "device": 0, "pid": {busy}, "used_memory_mib": 900,
               "sm_util": 0}})
# The busy process goes idle: both readers must come down to 0, eventually (generous deadline).
deadline = time.monotonic() + 30
later = {{}}
while time.monotonic() < deadline:
    later = {{"agent": agent_util(s), "nvitop": nvitop_util(0)}}
    if later["agent"].get("{busy}") == 0 and later["nvitop"].get("{busy}") == 0:
        break
    time.sleep(0.2)
out = {{"first": first, "later": later}}
""")
    finally:
        for pid in (busy, idle):
            node.command({"op": "proc_rm", "pid": pid})
    first, later = out["first"], out["later"]
    assert isinstance(first, dict) and isinstance(later, dict)
    # While busy: both see 60 % for the busy process and 0 for the idle one.
    assert first["agent"] == {str(busy): 0.6, str(idle): 0.0}
    assert first["nvitop"] == {str(busy): 60, str(idle): 0}
    # After it went idle: 0 in both, not the last busy figure.
    assert later["agent"] == {str(busy): 0.0, str(idle): 0.0}
    assert later["nvitop"] == {str(busy): 0, str(idle): 0}


def test_agent_takes_the_newest_sample_whatever_the_order(node: SimulatedNode,
                                                          sleepers: list[int]) -> None:
    for pid in sleepers:
        node.command({"op": "proc_add", "device": 0, "pid": pid, "used_memory_mib": 100,
                      "sm_util": 80})
    try:
        out = _client(node, f"""
pids = {sleepers!r}
for pid in pids:  # new figures: the 80 % samples stay in the driver's buffer, older
    command(SOCK, {{"op": "proc_add", "device": 0, "pid": pid, "used_memory_mib": 100,
                   "sm_util": 20}})
raw = N.nvmlDeviceGetProcessUtilization(h[0], 0)
order = {{}}
for x in raw:
    order.setdefault(str(x.pid), []).append([x.timeStamp, x.smUtil])
# Fresh samplers (cursor 0) read the whole buffer, each in a new shuffled order.
agent = [agent_util(sampler(0)) for _ in range(5)]
out = {{"order": order, "agent": agent, "nvitop": nvitop_util(0), "newest": newest(0)}}
""")
    finally:
        for pid in sleepers:
            node.command({"op": "proc_rm", "pid": pid})
    order = out["order"]
    assert isinstance(order, dict)
    # Precondition: the node served the older 80 % sample beside the newer 20 % one. Their
    # order is shuffled per call, so over 8 processes and 5 reads a reader that takes the last
    # entry (or the first) gets some process wrong.
    for pid in sleepers:
        by_time = sorted(order[str(pid)])
        assert {sm for _, sm in by_time} == {80, 20} and by_time[-1][1] == 20, by_time
    expected = {str(pid): 0.2 for pid in sleepers}
    assert out["newest"] == {str(pid): 20 for pid in sleepers}
    assert out["agent"] == [expected] * 5
    assert out["nvitop"] == {str(pid): 20 for pid in sleepers}
