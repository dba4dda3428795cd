"""The NVIDIA device against a simulated node that fails as nvml.h allows (real pynvml).

Each test injects one fault with the node's ``fail`` / ``driver_reload`` / ``reset_required``
operations and runs the agent's real ``NvidiaDevice`` (and event watcher) in a client process.
Each fails on the behaviour before the error policy: a whole-call error at probe escaped
``probe()``, a transient per-field code dropped the field for good, ``NO_PERMISSION`` turned
a call off for good, ``RESET_REQUIRED`` was a gap in healthy data, NVML was never initialised
again after a driver reload and a broken event set was reused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario

pytestmark = pytest.mark.integration

SCENARIO = """
devices:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000000
    power_w: 500
    memory_temperature_c: 71
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000001
    power_w: 400
"""

# The agent's device on the client's pynvml; ``metrics(dev, group)`` names what a read served.
SETUP = """
from gpu_otel_agent.backends.protocol import DeviceLost, DeviceNeedsReset
from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
from gpu_otel_agent.plugins.nvidia.backoff import Backoff
from gpu_otel_agent.plugins.nvidia.device import NvidiaDevice
from gpu_otel_agent.simulation.node.control_client import command
SOCK = os.environ["GPU_SIM_SOCKET"]
backend = NvidiaBackend()
backend.open()
devs = backend.devices()
def metrics(dev, group="fast"):
    return sorted({r.metric + "".join(f"{{{v}}}" for _, v in r.attributes)
                   for r in dev.read(group)})
def fail(**kw):
    command(SOCK, {"op": "fail", **kw})
"""


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    with SimulatedNode.start(write_scenario(tmp_path, SCENARIO), state_dir=tmp_path / "st") as n:
        yield n


def _run(node: SimulatedNode, code: str) -> Any:
    return run_client(node, SETUP + code, timeout=60)


@pytest.mark.parametrize("code", ["UNKNOWN", "TIMEOUT"])
def test_whole_field_batch_error_at_probe_keeps_the_device(node: SimulatedNode,
                                                           code: str) -> None:
    out = _run(node, f"""
fail(device=0, function="nvmlDeviceGetFieldValues", code={code!r}, count=1)
groups = sorted(devs[0].probe())
out = {{"groups": groups, "read": metrics(devs[0]), "counts": {{
    "/".join(k): v for k, v in devs[0].error_counts().items()}}}}
""")
    assert "fast" in out["groups"] and "slow" in out["groups"]
    # The fields are settled by the next read: served from the field batch again.
    assert "hw.temperature{memory}" in out["read"]
    assert "hw.energy" in out["read"]
    assert out["counts"][f"nvmlDeviceGetFieldValues/NVML_ERROR_{code}"] == 1  # whole call


def test_reset_required_at_probe_is_a_device_state(node: SimulatedNode) -> None:
    out = _run(node, """
command(SOCK, {"op": "reset_required", "device": 1})
try:
    devs[1].probe()
    out = {"probe": "ok"}
except DeviceNeedsReset as e:
    out = {"probe": "reset", "lost": isinstance(e, DeviceLost)}
command(SOCK, {"op": "reset", "device": 1})
out["after"] = sorted(devs[1].probe())
out["other"] = sorted(devs[0].probe())
""")
    assert out["probe"] == "reset" and out["lost"]
    assert "fast" in out["after"] and "fast" in out["other"]


def test_transient_field_code_at_probe_keeps_the_field(node: SimulatedNode) -> None:
    out = _run(node, """
fail(device=0, field=N.NVML_FI_DEV_MEMORY_TEMP, code="UNKNOWN", count=1)
devs[0].probe()
out = metrics(devs[0])
""")
    assert "hw.temperature{memory}" in out  # the memory temperature has no alternative


def test_no_permission_is_asked_again_at_a_backed_off_interval(node: SimulatedNode) -> None:
    out = _run(node, """
import time
dev = NvidiaDevice(devs[0]._handle, devs[0].identity, backoff=Backoff(first_s=1.0))
fail(device=0, function="nvmlDeviceGetMemoryInfo_v2", code="NO_PERMISSION", count=2)
dev.probe()  # first NO_PERMISSION: kept, backed off for 1 s
calls = lambda: dev.call_times().get("nvmlDeviceGetMemoryInfo_v2", (0, 0))[0]
after_probe = calls()
during = [metrics(dev) for _ in range(5)]  # within the 1 s: not asked
asked_during = calls() - after_probe
time.sleep(1.1)
second = metrics(dev)  # due: asked, NO_PERMISSION again (now 2 s)
time.sleep(2.1)
third = metrics(dev)   # due again: permission granted
out = {"asked_during": asked_during, "during": during[-1], "second": second,
       "third": third}
""")
    assert out["asked_during"] == 0
    assert "hw.gpu.memory.usage" not in out["during"]
    assert "hw.gpu.memory.usage" not in out["second"]
    assert "hw.gpu.memory.usage" in out["third"]  # before: off for good after the probe


def test_reset_required_while_reading_then_reset(node: SimulatedNode) -> None:
    out = _run(node, """
devs[1].probe()
command(SOCK, {"op": "reset_required", "device": 1})
try:
    devs[1].read("fast")
    out = {"read": "ok"}
except DeviceNeedsReset as e:
    out = {"read": "reset required"}
devs[0].probe()
out["other"] = metrics(devs[0])
command(SOCK, {"op": "reset", "device": 1})
out["after"] = sorted(devs[1].probe())
""")
    assert out["read"] == "reset required", out
    assert "hw.power" in out["other"]
    assert "fast" in out["after"]


def test_driver_reload_reinitialises_nvml_and_finds_devices_by_uuid(
        node: SimulatedNode) -> None:
    out = _run(node, """
for d in devs:
    d.probe()
before = [metrics(d) for d in devs]
command(SOCK, {"op": "driver_reload"})
first = [metrics(d) for d in devs]  # the failing call re-initialises NVML
second = [metrics(d) for d in devs]
out = {"before": before, "second": second, "uuids": [d.identity.uuid for d in devs],
       "generation": backend._session.generation,
       "uninit": sum(v for d in devs for (f, c), v in d.error_counts().items()
                     if c == "NVML_ERROR_UNINITIALIZED")}
""")
    assert out["second"] == out["before"]
    assert out["generation"] == 1  # once for the node, not once per GPU
    assert out["uninit"] >= 1


def test_event_set_broken_by_a_driver_reload_is_replaced(node: SimulatedNode) -> None:
    out = _run(node, """
import time
from gpu_otel_agent.plugins.nvidia.event_sets import NvmlEventWatcher
events = []
watcher = NvmlEventWatcher(devs[0]._handle, devs[0].identity.uuid, 0,
                           session=backend._session, errors=devs[0].errors)
watcher.start(events.extend)
def wait_for(check, seconds=20):
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()
wait_for(lambda: watcher.registrations == 1)
command(SOCK, {"op": "xid", "device": 0, "code": 31})
wait_for(lambda: any(e.code == 31 for e in events))
command(SOCK, {"op": "driver_reload"})
# Nothing else calls NVML in this process: the event thread itself re-initialises it.
replaced = wait_for(lambda: watcher.registrations >= 2)
command(SOCK, {"op": "xid", "device": 0, "code": 79})
seen = wait_for(lambda: any(e.code == 79 for e in events))
watcher.stop()
out = {"replaced": replaced, "seen": seen, "codes": [e.code for e in events if e.code],
       "errors": sorted("/".join(k) for k in devs[0].error_counts())}
""")
    assert out["replaced"], out
    assert out["seen"], out
    assert out["codes"] == [31, 79]


def test_a_group_that_stays_unsettled_is_probed_again_only_when_due(
        node: SimulatedNode) -> None:
    out = _run(node, """
dev = NvidiaDevice(devs[0]._handle, devs[0].identity, backoff=Backoff(first_s=60.0))
fail(device=0, function="nvmlDeviceGetFieldValues", code="UNKNOWN", count=3)
dev.probe()  # fast and slow batches fail: both unsettled
calls = lambda: dev.call_times()["nvmlDeviceGetFieldValues"][0]
power = lambda: dev.call_times().get("nvmlDeviceGetPowerUsage", (0, 0))[0]
first = metrics(dev)  # settles fast: its batch fails again (3rd): backed off for 60 s
c0, p0 = calls(), power()
reads = [metrics(dev) for _ in range(5)]
out = {"first": first, "last": reads[-1], "batch_calls": calls() - c0,
       "power_calls": power() - p0}
""")
    # Not settled: no probe per read (that would call the power fallback every time too),
    # one batch per read, and the kept fields are served once the batch answers.
    assert out["batch_calls"] == 5
    assert out["power_calls"] == 0
    assert "hw.temperature{memory}" in out["last"]
