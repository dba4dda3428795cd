"""The NVML event watcher's thread, killed (an exception raised inside it, as a bug would), is
logged, counted and restarted: it registers a fresh event set and the next XID is delivered
(the agent's own watcher, through real pynvml and the compiled simulated library, in a client
process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario

pytestmark = pytest.mark.integration
SCENARIO = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
"""


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("watchers")
    with SimulatedNode.start(write_scenario(tmp, SCENARIO), state_dir=tmp / "state") as n:
        yield n


def test_the_nvml_event_thread_killed_is_restarted_and_still_delivers(
    node: SimulatedNode,
) -> None:
    out = run_client(node, """
import ctypes, threading
from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
from gpu_otel_agent.plugins.nvidia.event_sets import NvmlEventWatcher
from gpu_otel_agent.simulation.node.control_client import command
from gpu_otel_agent.threads.supervised import restarts
SOCK = os.environ["GPU_SIM_SOCKET"]
backend = NvidiaBackend()
backend.open()
devices = backend.devices()
got = []
watcher = NvmlEventWatcher(h[0], devices[0].identity.uuid, 0)
watcher.start(got.extend)
def until(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()
until(lambda: watcher.registrations >= 1)
class Bug(Exception):
    pass
thread = next(t for t in threading.enumerate() if t.name == watcher.name)
killed = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                    ctypes.py_object(Bug))
restarted = until(lambda: restarts().get(watcher.name, 0) >= 1)  # its wait returns in 5 s
registered_again = until(lambda: watcher.registrations >= 2)
command(SOCK, {"op": "xid", "device": 0, "code": 43})
delivered = until(lambda: any(e.code == 43 for e in got))
watcher.stop()
out = {"killed": killed, "restarted": restarted, "registered_again": registered_again,
       "delivered": delivered, "alive": thread.is_alive()}
""", timeout=120)
    assert out == {"killed": 1, "restarted": True, "registered_again": True,
                   "delivered": True, "alive": True}


AMD_SCENARIO = """
devices:
  - vendor: amd
    model: AMD Instinct MI300X
"""


def test_the_amd_event_thread_killed_is_restarted_and_still_delivers(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    import json
    import subprocess
    import sys

    from tests.unit.simulator.simhelpers import client_env

    tmp = tmp_path_factory.mktemp("amd-watcher")
    with SimulatedNode.start(write_scenario(tmp, AMD_SCENARIO), state_dir=tmp / "state") as node:
        script = """
import ctypes, json, os, threading, time
from gpu_otel_agent.backends.protocol import EventSourceOptions
from gpu_otel_agent.plugins.amd.backend import AmdBackend
from gpu_otel_agent.simulation.node.control_client import command
from gpu_otel_agent.threads.supervised import restarts
SOCK = os.environ["GPU_SIM_SOCKET"]
backend = AmdBackend()
backend.open()
(source,) = backend.event_sources(backend.devices(), EventSourceOptions())
got = []
source.start(got.extend)
def until(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()
until(lambda: any(t.name == source.name for t in threading.enumerate()))
time.sleep(0.5)  # subscribed and waiting
class Bug(Exception):
    pass
thread = next(t for t in threading.enumerate() if t.name == source.name)
killed = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                    ctypes.py_object(Bug))
restarted = until(lambda: restarts().get(source.name, 0) >= 1)
time.sleep(0.5)  # subscribed again
command(SOCK, {"op": "event", "device": 0, "type": "thermal_throttle"})
delivered = until(lambda: bool(got))
source.stop()
print(json.dumps({"killed": killed, "restarted": restarted, "delivered": delivered,
                  "alive": thread.is_alive()}))
"""
        done = subprocess.run([sys.executable, "-c", script], env=client_env(node),
                              capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "killed": 1, "restarted": True, "delivered": True, "alive": True}
