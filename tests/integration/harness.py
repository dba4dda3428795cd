"""Runs the real agent (``gpu-agent run``) as a child process against a simulated node."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from gpu_otel_agent.local.client import LocalClientError, get
from tests.receivers.netutil import wait_for_port

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "examples" / "scenarios"


def write_scenario(directory: Path, scenario: Mapping[str, object]) -> Path:
    path = directory / "scenario.yaml"
    path.write_text(yaml.safe_dump(dict(scenario)), encoding="utf-8")
    return path


def h100(index: int, **readings: object) -> dict[str, object]:
    device: dict[str, object] = {
        "model": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "power_limit_w": 700,
        "utilization_gpu": 50,
        "utilization_memory": 20,
        "memory_used_mib": 1000,
        "temperature_c": 50,
        "memory_temperature_c": 60,
        "power_w": 300,
        "sm_clock_mhz": 1980,
        "memory_clock_mhz": 2619,
        "fan_percent": None,
    }
    device.update(readings)
    return device


class AgentProcess:
    """``gpu-agent run`` in a child process; stderr is kept in a file for assertions."""

    def __init__(
        self,
        workdir: Path,
        endpoint: str,
        node_env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        wrapper: Sequence[str] = (),  # a command the agent runs under (setpriv, ...)
    ) -> None:
        self.log_path = workdir / f"agent-{time.monotonic_ns()}.log"
        # Each agent's own local endpoint, in a short private directory (sun_path is 108
        # bytes; pytest's tmp_path can be longer): never /run's, nor another test's.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="ga-"))
        self.socket_path = self.socket_dir / "agent.sock"
        full_env = dict(os.environ)
        full_env.update(node_env or {})
        full_env.update(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
                "PYTHONUNBUFFERED": "1",
                # Each test's own event spool: never another test's (or a real agent's).
                "GPU_AGENT_EVENT_SPOOL": str(workdir / "event-spool"),
                "GPU_AGENT_LOCAL_SOCKET": str(self.socket_path),
            }
        )
        full_env.update(env or {})
        command = [*wrapper, sys.executable, "-m", "gpu_otel_agent.cli", "run", *args]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, env=full_env, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO
        )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def terminate(self, timeout: float = 10.0) -> float:
        """SIGTERM; returns the seconds until the process exited."""
        start = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()  # never leak an agent into later tests
            self.process.wait()
            raise AssertionError(
                f"agent still running {timeout}s after SIGTERM; its log:\n{self.log()[-4000:]}"
            ) from None
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        return time.monotonic() - start

    def shutdown(self, timeout: float = 60.0) -> None:
        """SIGTERM, then the agent must exit by itself with code 0 after logging its run
        summary. The bound is generous on purpose: a clean exit is the behaviour under test,
        how fast it is goes in the benchmark suite, not here (a loaded CI machine is slow)."""
        self.terminate(timeout)
        log = self.log()
        assert self.process.returncode == 0, (
            f"agent exited with {self.process.returncode}; its log:\n{log[-4000:]}")
        assert "run summary" in log, f"agent exited without its run summary:\n{log[-4000:]}"

    def serving(self, port: int, timeout: float = 20) -> AgentProcess:
        """This agent once its local endpoint (Prometheus) accepts connections on ``port``;
        closed, with its log in the error, if it never does or exits first."""
        if not wait_for_port("127.0.0.1", port, timeout, alive=lambda: self.process.poll() is None):
            self.close()
            raise AssertionError(f"agent endpoint never came up:\n{self.log()[-3000:]}")
        return self

    def answering(self, timeout: float = 30) -> AgentProcess:
        """This agent once its local endpoint (the Unix socket of ``gpu-agent top``) serves
        every device; closed, with its log in the error, if it never does or exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            with contextlib.suppress(LocalClientError):
                devices = get(self.socket_path, "/v1/snapshot")["devices"]
                if devices and all(d["readings"] for d in devices):
                    return self
            time.sleep(0.1)
        self.close()
        raise AssertionError(f"local endpoint never answered:\n{self.log()[-3000:]}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
