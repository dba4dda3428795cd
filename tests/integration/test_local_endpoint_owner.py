"""A user's run next to another user's agent (issue 31): the socket at the configured path
belongs to an agent this user may not open. Only a refused connection means a stale socket;
permission denied means another agent owns it, so a run carries on without its local endpoint
and leaves the socket alone, and ``check`` says "permission denied", not "no agent serves".

The other user is real: this process (root) serves the socket and hands it and its directory
to nobody (65534); the agent and the check run as uid 0 with every capability dropped
(``setpriv``), so the kernel's permission checks apply to them as to any user, and they can
still read the clone wherever it lives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.local.client import get
from gpu_otel_agent.local.endpoint import LocalEndpoint
from gpu_otel_agent.local.routes import Sources, build_routes
from gpu_otel_agent.model.snapshot import SnapshotStore
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess

pytestmark = pytest.mark.integration
NOBODY = 65534
NO_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]


@pytest.fixture
def others_socket() -> Iterator[Path]:
    """A live agent socket of another user, in that user's directory."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to serve as one user and connect as another")
    directory = Path(tempfile.mkdtemp(prefix="ga-other-"))
    endpoint = LocalEndpoint(directory / "agent.sock", None,
                             build_routes(Sources(SnapshotStore(), None, {})))
    endpoint.start()
    try:
        os.chown(endpoint.path, NOBODY, NOBODY)
        os.chown(directory, NOBODY, NOBODY)
        directory.chmod(0o755)
        yield endpoint.path
    finally:
        endpoint.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_a_run_that_may_not_open_the_socket_leaves_it_and_carries_on(
        others_socket: Path, four_gpu_node: SimulatedNode, tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path, "http://127.0.0.1:1", four_gpu_node.env,
                         args=["--exporter", "none"], wrapper=NO_CAPS,
                         env={"GPU_AGENT_LOCAL_SOCKET": str(others_socket)})
    try:
        deadline = time.monotonic() + 60
        while "local endpoint" not in agent.log() and agent.process.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert agent.process.poll() is None, agent.log()[-3000:]
        log = agent.log()
        assert "belongs to another agent (permission denied" in log, log[-3000:]
        assert "Traceback" not in log
    finally:
        agent.shutdown()
    assert others_socket.is_socket()
    assert get(others_socket, "/v1/snapshot")["devices"] == []  # the other agent still serves


def test_check_says_permission_denied(others_socket: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GPU_AGENT_LOCAL_SOCKET": str(others_socket),
           "GPU_AGENT_EVENT_SPOOL": str(tmp_path / "spool"),
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
    done = subprocess.run([*NO_CAPS, sys.executable, "-m", "gpu_otel_agent.cli", "check",
                           "--json"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    results = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    detail = results["running agent"]["detail"]
    assert "permission denied" in detail
    assert "no agent serves" not in detail
