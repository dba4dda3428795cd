"""``gpu-agent npd`` against a running agent on the simulated node, as Node Problem Detector
runs it: a fresh process, its exit code (0 OK / 1 NonOK / 2 Unknown) and one line of stdout
within NPD's 80-byte message limit, for healthy, degraded and failed GPUs, and for an agent that
is gone."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_otel_agent.local.client import get
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
CONFIG = ("groups: {slow: {interval: 0.25}}\nhealth: {degrade_after: 2, clear_after: 2}\n"
          "lost_reprobe_interval: 0.5\n")


def npd(agent: AgentProcess, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "gpu_otel_agent.cli", "npd", "--socket", str(agent.socket_path),
         *args], capture_output=True, text=True, timeout=30, check=False)
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0].encode()) <= 80, done.stdout + done.stderr
    return done.returncode, lines[0]


def until_state(agent: AgentProcess, index: int, subsystem: str, state: str) -> None:
    """The agent's own health document says so (bounded wait; no fixed sleep)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        devices = get(agent.socket_path, "/v1/health")["devices"]
        if devices[index]["subsystems"][subsystem]["state"] == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"GPU {index} {subsystem} never {state}: {devices[index]}")


def test_exit_codes_and_messages_for_healthy_degraded_failed_and_gone(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node = four_gpu_node
    path = tmp_path / "agent.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                         ["--config", str(path), "--interval", "0.25"]).answering()
    try:
        assert npd(agent) == (0, "4 GPU(s) healthy (all subsystems)")

        node.command({"op": "set", "device": 1, "values": {"nvlink.7.state": "down"}})
        until_state(agent, 1, "nvlink", "degraded")
        code, message = npd(agent)
        assert (code, message) == (1, "GPU 1 nvlink degraded: NVLink link(s) 7 down of 18")
        assert npd(agent, "--subsystem", "pcie", "--subsystem", "thermal") == (
            0, "4 GPU(s) healthy (pcie/thermal)")
        assert npd(agent, "--at-least", "failed") == (0, "4 GPU(s) healthy (all subsystems)")

        node.command({"op": "lost", "device": 2})
        until_state(agent, 2, "driver", "failed")
        code, message = npd(agent)
        assert code == 1 and message.startswith("GPU 2 driver failed: ")
        assert message.endswith(" (+1 more)")  # GPU 1's NVLink, behind the failed GPU
        code, message = npd(agent, "--at-least", "failed")
        assert code == 1 and message.startswith("GPU 2 driver failed: ") and "more" not in message

        node.command({"op": "recover", "device": 2})
        node.command({"op": "set", "device": 1, "values": {"nvlink.7.state": "up"}})
        until_state(agent, 1, "nvlink", "ok")
        until_state(agent, 2, "driver", "ok")
        assert npd(agent)[0] == 0
    finally:
        agent.shutdown()
        agent.close()
    code, message = npd(agent)
    assert code == 2 and message.startswith("gpu-otel-agent: ")
