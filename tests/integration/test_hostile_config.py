"""Hostile configuration files against a running agent (issue 39, item 6): bytes that are not
UTF-8, a UTF-16 file, a FIFO at the configuration path. Each is refused with one line; the file
watch goes on; reading never blocks the event loop (metrics go on, SIGTERM is obeyed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess
from tests.polling import wait_until
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
SLOW_ON = "groups: {slow: {enabled: true, interval: 0.25}}\n"
SLOW_OFF = "groups: {slow: {enabled: false, interval: 0.25}}\n"


def _points_after(store: Store, metric: str, since: float) -> list[object]:
    return [p for p in store.points(metric, {"hw.id": UUIDS[0]}) if p.received_at > since]


def _replace(config: Path, data: bytes) -> None:
    """Written beside, renamed over: one change event, never a half-written file."""
    temporary = config.with_name(config.name + ".new")
    temporary.write_bytes(data)
    temporary.rename(config)


def _start(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "run", "--config",
                           str(path)], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("data", "words"), [
    (b"log_level: info\nnode_name: caf\xe9\n", "not UTF-8"),
    ("log_level: info\n".encode("utf-16"), "UTF-16"),
])
def test_a_file_that_is_not_utf_8_is_refused_at_start_with_one_line(
    tmp_path: Path, data: bytes, words: str,
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_bytes(data)
    result = _start(config)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and str(config) in lines[0], result.stderr


def test_a_fifo_at_start_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    os.mkfifo(config)
    result = _start(config)  # no writer ever opens it: a blocking read would hang here
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "not a regular file" in result.stderr


def test_bad_bytes_and_a_fifo_on_reload_are_refused_and_the_watch_goes_on(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(SLOW_ON, encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, four_gpu_node.env,
                         ["--config", str(config), *FAST])
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _points_after(s, "gpu.performance_state", 0), timeout=30)

        # One byte that is not UTF-8: one line, and the watch is still there afterwards.
        _replace(config, b"groups: {slow: {enabled: false}}\nnode_name: caf\xe9\n")
        wait_until(lambda: "not UTF-8" in agent.log(), timeout=30)
        _replace(config, "log_level: info\n".encode("utf-16"))
        wait_until(lambda: "UTF-16" in agent.log(), timeout=30)
        assert "Traceback" not in agent.log()

        # A FIFO renamed over the file: nothing ever writes to it. The loop must not block
        # on it: metrics keep arriving, and the watch still sees the next real file.
        fifo = tmp_path / "agent.fifo"
        os.mkfifo(fifo)
        fifo.rename(config)
        wait_until(lambda: "not a regular file" in agent.log(), timeout=30)
        after_fifo = time.time()
        store.wait_for(lambda s: _points_after(s, "hw.power", after_fifo), timeout=30,
                       what="metrics after the FIFO appeared")
        _replace(config, SLOW_OFF.encode())
        wait_until(lambda: "configuration reloaded" in agent.log(), timeout=30)
        assert agent.log().count("Traceback") == 0
        for line in agent.log().splitlines():
            if "reload rejected" in line:  # each refusal is one line naming the file
                assert str(config) in line
    finally:
        agent.shutdown()  # SIGTERM is obeyed: asserts a clean exit
        agent.close()
