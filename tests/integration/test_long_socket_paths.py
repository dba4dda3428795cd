"""Deep directories: a simulated node whose XDG_RUNTIME_DIR (and a ``top`` whose TMPDIR) is so
deep that its sockets' paths are longer than a Unix socket address holds (108 bytes on Linux).
``gpu-agent sim ...`` reaches its node and ``top --once`` its agent all the same
(``gpu_otel_agent.unix_socket``): what failed with "AF_UNIX path too long" before."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.simulator.simhelpers import write_scenario

pytestmark = pytest.mark.integration
CLI = [sys.executable, "-m", "gpu_otel_agent.cli"]
A = "devices: [{model: NVIDIA H100 80GB HBM3}, {model: NVIDIA H100 80GB HBM3}]\n"
SUN_PATH = 108


def _deep(base: Path, length: int = 120) -> Path:
    """A directory whose own path is ``length`` bytes: every socket in it is too long for a
    socket address."""
    # Longer than ``length`` where the temporary directory itself is deep.
    directory = base / ("d" * max(1, length - len(os.fsencode(base)) - 1))
    directory.mkdir(mode=0o700, parents=True)
    assert len(os.fsencode(directory)) >= length
    return directory


def _env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items()
               if not k.startswith("GPU_SIM_") and k != "LD_LIBRARY_PATH"},
            "XDG_RUNTIME_DIR": str(_deep(tmp_path / "run")),
            "TMPDIR": str(_deep(tmp_path / "tmp")),
            "GPU_AGENT_EVENT_SPOOL": str(tmp_path / "spool"), "COLUMNS": "80"}


def _sim(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "sim", *argv], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_sim_and_top_on_a_node_whose_runtime_directory_is_deep(tmp_path: Path) -> None:
    env = _env(tmp_path)
    up = subprocess.Popen([*CLI, "sim", "up", str(write_scenario(tmp_path, A))], env=env,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True)
    try:
        assert up.stdout is not None and up.stderr is not None
        line = up.stdout.readline()
        assert line, up.stderr.read()
        info = json.loads(line)
        socket_path = Path(info["socket"])
        assert socket_path.is_relative_to(env["XDG_RUNTIME_DIR"])
        assert len(os.fsencode(socket_path)) > SUN_PATH
        assert socket_path.is_socket()  # made in its real directory
        node = _sim(env, "node")
        assert node.returncode == 0, node.stderr
        assert json.loads(node.stdout)["node"]["socket"] == str(socket_path)
        xid = _sim(env, "xid", "--device", "0", "--code", "31")
        assert xid.returncode == 0, xid.stderr
        # No agent: top starts one of its own on the node, its socket in the deep TMPDIR.
        once = subprocess.run([*CLI, "top", "--once"], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, check=False,
                              env={**env, **info["env"], "GPU_AGENT_LOCAL_SOCKET":
                                   str(_deep(tmp_path / "local") / "agent.sock")})
        assert once.returncode == 0, once.stderr
        lines = once.stdout.splitlines()
        assert re.match(r"gpu-agent top \d\d:\d\d:\d\d · standalone: ", lines[0]), lines[0]
        assert len([row for row in lines if re.match(r"\s+\d H100 80GB HBM3 ", row)]) == 2
        assert list(Path(env["TMPDIR"]).iterdir()) == []  # its temporary directory removed
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
    assert not socket_path.exists()  # removed at exit, through its real path
