"""`gpu-agent sim ...` names the node it reached, tells a stale socket from a live one, and
`sim up` beside a `run --simulate` comes up on a socket of its own, warning whose the default
one is (docs/simulator.md, "Changing it at run time")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.polling import wait_until
from tests.unit.simulator.simhelpers import write_scenario

CLI = [sys.executable, "-m", "gpu_otel_agent.cli"]
A = "devices: [{model: NVIDIA H100 80GB HBM3}]\n"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A private XDG_RUNTIME_DIR: the well-known control socket is the test's own."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    yield {**{k: v for k, v in os.environ.items() if not k.startswith("GPU_SIM_")},
           "XDG_RUNTIME_DIR": str(run), "GPU_AGENT_EVENT_SPOOL": str(tmp_path / "spool"),
           "GPU_AGENT_LOCAL_SOCKET": str(tmp_path / "agent.sock")}


def _sim(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "sim", *argv], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def _up(env: dict[str, str], scenario: Path) -> tuple[subprocess.Popen[str], Any]:
    proc = subprocess.Popen([*CLI, "sim", "up", str(scenario)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, json.loads(line)


def _run_simulate(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([*CLI, "run", "--simulate", "h100-8gpu", "--exporter", "none"],
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _node(env: dict[str, str]) -> dict[str, Any]:
    done = _sim(env, "node")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["ok"] is True
    node: dict[str, Any] = reply["node"]
    return node


def test_sim_up_beside_a_run_simulate_warns_and_each_command_names_its_node(
        env: dict[str, str], tmp_path: Path) -> None:
    agent = _run_simulate(env, tmp_path / "agent.log")
    try:
        wait_until(lambda: _sim(env, "node").returncode == 0,
                   what="run --simulate never linked the default control socket")
        theirs = _node(env)
        assert theirs["scenario"].endswith("h100-8gpu.yaml")
        up, info = _up(env, write_scenario(tmp_path, A))
        try:
            assert info["ready"] is True
            mine = {**env, "GPU_SIM_SOCKET": info["socket"]}
            node = _node(mine)
            assert node["pid"] == up.pid and node["scenario"].endswith(".yaml")
            assert node["pid"] != theirs["pid"] and node["socket"] != theirs["socket"]
            # Without GPU_SIM_SOCKET a command still reaches the run's node, and says so.
            xid = _sim(env, "xid", "--device", "0", "--code", "31")
            assert json.loads(xid.stdout)["node"]["pid"] == theirs["pid"]
        finally:
            _stop(up)
        assert up.stderr is not None
        warning = up.stderr.read()
        assert f"pid {theirs['pid']}, scenario {theirs['scenario']}" in warning, warning
        assert up.returncode == 0
    finally:
        _stop(agent)


def test_a_stale_socket_is_told_apart_and_taken_over(env: dict[str, str],
                                                     tmp_path: Path) -> None:
    # A terminal closed under a `sim up`: it goes, and takes its socket with it.
    up, info = _up(env, write_scenario(tmp_path, A))
    socket_path = Path(info["socket"])
    os.killpg(up.pid, signal.SIGHUP)
    assert up.wait(30) == 0
    assert not socket_path.exists()
    # Killed outright, a node leaves its socket: the next command says it is stale.
    up, info = _up(env, write_scenario(tmp_path, A))
    assert Path(info["socket"]) == socket_path
    up.kill()
    up.wait(30)
    assert socket_path.exists()
    stale = _sim(env, "stats")
    assert stale.returncode == 1
    assert f"the control socket {socket_path} is stale" in stale.stderr, stale.stderr
    # The next node takes the stale path over: commands reach it, not "no node".
    agent = _run_simulate(env, tmp_path / "agent.log")
    try:
        wait_until(lambda: _sim(env, "node").returncode == 0,
                   what=(tmp_path / "agent.log").read_text(errors="replace")[-2000:])
        assert _node(env)["scenario"].endswith("h100-8gpu.yaml")
    finally:
        _stop(agent)
