"""NVML answers the error policy calls transient or backed-off are handled as it says, on the
real agent against the simulated node: a transient NVML_ERROR_UNKNOWN on a process list is
not an ERROR with a traceback, over and over; a reading backed off after NO_PERMISSION comes
back once the errors stop."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.nvidia.backoff import FIRST_ENV
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
# The back-off's first wait, 30 s in production, cut to 2 s: the same back-off (absent, asked
# again later, doubling), without half a minute of waiting per test.
SHORT_BACKOFF = {FIRST_ENV: "2"}


def _exports_pass(store: Store, count: int) -> None:
    """Wait for ``count`` more metric exports: time measured in the agent's cycles."""
    seen = len(store.received("metrics"))
    store.wait_for(lambda s: len(s.received("metrics")) >= seen + count, timeout=60,
                   what=f"{count} more metric exports")


def test_a_transient_unknown_on_a_process_list_is_not_logged_as_an_error(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, store = four_gpu_node, otlp_grpc_receiver.store
    pid = os.getpid()  # a real process, so attribution finds it
    node.command({"op": "proc_add", "device": 0, "pid": pid, "used_memory_mib": 1000,
                  "sm_util": 10})
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {processes: {interval: 0.25}}\n", encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                         [*FAST, "--config", str(config)])

    def process_points(since: float) -> list[Point]:
        return [p for p in store.points("gpu.process.memory.usage", {"process.pid": pid})
                if p.received_at > since]

    try:
        store.wait_for(lambda s: process_points(0), timeout=30, what="the process, read")
        for device in range(4):
            node.command({"op": "fail", "device": device,
                          "function": "nvmlDeviceGetComputeRunningProcesses_v3",
                          "code": "UNKNOWN", "count": 8})
        # Every GPU's process list fails eight reads in a row (counted by the node) ...
        deadline = time.monotonic() + 60
        while [f["hits"] for f in node.stats()["chaos"]["faults"]] != [8] * 4:  # type: ignore[index]
            assert time.monotonic() < deadline, node.stats()["chaos"]
            time.sleep(0.1)
        # ... and is read again after them: a transient error costs a cycle, not the list.
        errors_over = time.time()
        store.wait_for(lambda s: process_points(errors_over), timeout=30,
                       what="the process, read again after the errors")
    finally:
        agent.shutdown()
        agent.close()
    log = agent.log()
    failures = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not failures, log[-4000:]


def test_a_reading_backed_off_after_no_permission_comes_back_when_it_is_granted(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """NO_PERMISSION is BACKOFF in the error policy: asked again later, less often; once the
    permission is there the reading is served again (not off for the run)."""
    import pynvml

    from tests.integration.conftest import UUIDS

    node, store = four_gpu_node, otlp_grpc_receiver.store
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST, SHORT_BACKOFF)

    def power_points() -> int:
        return sum(1 for p in store.points("hw.power") if p.attributes.get("hw.id") == UUIDS[0])

    try:
        store.wait_for(lambda s: power_points() > 0, timeout=30)
        node.command({"op": "fail", "device": 0, "field": pynvml.NVML_FI_DEV_POWER_INSTANT,
                      "code": "NO_PERMISSION"})
        node.command({"op": "fail", "device": 0, "function": "nvmlDeviceGetPowerUsage",
                      "code": "NO_PERMISSION"})
        _exports_pass(store, 4)  # the refusal met, the readings before it exported
        before = power_points()
        _exports_pass(store, 12)  # 3 s of cycles: past the first retry (2 s), still refused
        assert power_points() == before  # backed off: absent, not zero
        node.command({"op": "fail", "device": 0, "off": True})
        # The reading is asked again at its next due time, and served.
        store.wait_for(lambda s: power_points() > before, timeout=60,
                       what="hw.power of GPU 0 after the permission came back")
    finally:
        agent.shutdown()
        agent.close()


def test_a_reading_refused_at_start_with_no_permission_comes_back_when_it_is_granted(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """The same when the permission is missing at start-up (the probe meets NO_PERMISSION)."""
    import pynvml

    from tests.integration.conftest import UUIDS

    node, store = four_gpu_node, otlp_grpc_receiver.store
    node.command({"op": "fail", "device": 0, "field": pynvml.NVML_FI_DEV_POWER_INSTANT,
                  "code": "NO_PERMISSION"})
    node.command({"op": "fail", "device": 0, "function": "nvmlDeviceGetPowerUsage",
                  "code": "NO_PERMISSION"})
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST, SHORT_BACKOFF)

    def power_points(uuid: str) -> int:
        return sum(1 for p in store.points("hw.power") if p.attributes.get("hw.id") == uuid)

    try:
        store.wait_for(lambda s: power_points(UUIDS[1]) > 4, timeout=30)
        assert power_points(UUIDS[0]) == 0
        node.command({"op": "fail", "device": 0, "off": True})
        store.wait_for(lambda s: power_points(UUIDS[0]) > 0, timeout=60,
                       what="hw.power of GPU 0 after the permission came back")
    finally:
        agent.shutdown()
        agent.close()
