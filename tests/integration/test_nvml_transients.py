"""NVML answers the error policy calls transient or backed-off are handled as it says, on the
real agent against the simulated node: a transient NVML_ERROR_UNKNOWN on a process list is
not an ERROR with a traceback, over and over; a reading backed off after NO_PERMISSION comes
back once the errors stop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.nvidia.simulator import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]


def test_a_transient_unknown_on_a_process_list_is_not_logged_as_an_error(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, store = four_gpu_node, otlp_grpc_receiver.store
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=30)
        for device in range(4):
            node.command({"op": "fail", "device": device,
                          "function": "nvmlDeviceGetComputeRunningProcesses_v3",
                          "code": "UNKNOWN", "count": 8})
        time.sleep(6)  # several process reads on every GPU meet the error
        exports = len(store.received("metrics"))
        store.wait_for(lambda s: len(s.received("metrics")) > exports + 4, timeout=30)
    finally:
        agent.shutdown()
        agent.close()
    log = agent.log()
    failures = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not failures, log[-4000:]
