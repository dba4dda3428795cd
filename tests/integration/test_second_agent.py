"""A second agent on the same node: its one error line says what to do, and it takes the local
socket over once the first is gone (stopped, or killed and its socket left stale), so `top`
and `npd` find an agent again within seconds."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.local.client import LocalClientError, get
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.polling import wait_until


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    scenario = write_scenario(tmp_path, {"devices": [h100(0)]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as started:
        yield started


def _serving_pid(socket_path: Path) -> int | None:
    try:
        return int(get(socket_path, "/v1/snapshot")["agent"]["pid"])
    except LocalClientError:
        return None


def test_a_second_agent_says_what_to_do_and_takes_the_socket_over(
        node: SimulatedNode, tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="ga2-"))  # sun_path is 108 bytes; tmp_path can be long
    socket_path = short / "agent.sock"
    shared = {"GPU_AGENT_LOCAL_SOCKET": str(socket_path)}  # and the spool: one workdir
    args = ["--exporter", "none"]
    agents = [AgentProcess(tmp_path, "http://127.0.0.1:1", node.env, args, shared)]
    try:
        first = agents[0]
        wait_until(lambda: _serving_pid(socket_path) == first.process.pid,
                   what="the first agent never served its socket")
        agents.append(AgentProcess(tmp_path, "http://127.0.0.1:1", node.env, args, shared))
        second = agents[1]
        wait_until(lambda: "one agent per node" in second.log() and "event spool" in second.log(),
                   what="the second agent never said it is one too many")
        errors = [line for line in second.log().splitlines() if " ERROR " in line]
        assert len(errors) == 2, errors  # the socket and the spool, each once
        local = next(line for line in errors if "local endpoint" in line)
        assert f"agent pid {first.process.pid}" in local and "GPU_AGENT_LOCAL_SOCKET" in local
        spool = next(line for line in errors if "event spool" in line)
        assert "GPU_AGENT_EVENT_SPOOL" in spool
        # The first stops: the second serves the socket.
        first.shutdown()
        wait_until(lambda: _serving_pid(socket_path) == second.process.pid,
                   what="the second agent never took the socket over")
        # Said once start() returns to the loop, which can be after a client was served.
        wait_until(lambda: "took over" in second.log(),
                   what="the second agent never said it took the socket over")
        # A third waits; the second is killed and leaves its socket stale: the third takes it.
        agents.append(AgentProcess(tmp_path, "http://127.0.0.1:1", node.env, args, shared))
        third = agents[2]
        wait_until(lambda: "one agent per node" in third.log(), what="the third never waited")
        second.process.send_signal(signal.SIGKILL)
        second.process.wait()
        assert socket_path.exists()  # stale: nothing listens
        wait_until(lambda: _serving_pid(socket_path) == third.process.pid,
                   what="the third agent never took the stale socket over")
        third.shutdown()
    finally:
        for agent in agents:
            agent.close()
