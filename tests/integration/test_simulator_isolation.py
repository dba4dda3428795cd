"""Two `gpu-agent sim up` never share a state directory; a SIGKILLed node's is reused."""

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

from gpu_otel_agent.simulation.node.control_client import command
from tests.unit.simulator.simhelpers import write_scenario

pytestmark = [pytest.mark.integration, pytest.mark.harness]  # tests the simulated node

A = "devices: [{model: NVIDIA H100 80GB HBM3, power_w: 500}]\n"
B = "devices: [{model: Tesla T4, power_w: 50}, {model: Tesla T4}]\n"
CLIENT = """
import json, os, sys
from gpu_otel_agent.simulation.node import attach_in_process
attach_in_process(dict(os.environ))
import pynvml as N
N.nvmlInit()
h = N.nvmlDeviceGetHandleByIndex(0)
print(json.dumps({"count": N.nvmlDeviceGetCount(), "name": N.nvmlDeviceGetName(h),
                  "power": N.nvmlDeviceGetPowerUsage(h)}))
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A private XDG_RUNTIME_DIR: the default state directory of `sim up` lives there."""
    run = tmp_path / "run"
    run.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GPU_SIM_SOCKET"}
    env["XDG_RUNTIME_DIR"] = str(run)
    yield env


def _up(env: dict[str, str], scenario: Path, *extra: str) -> tuple[subprocess.Popen[str], Any]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_otel_agent.cli", "sim", "up", str(scenario), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no output"
    return proc, json.loads(line)


def _client(info: Any) -> Any:
    env = dict(os.environ)
    env.update(info["env"])
    out = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_two_nodes_are_isolated_and_a_killed_nodes_dir_is_reused(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    a_proc, a = _up(runtime, write_scenario(tmp_path, A, "a.yaml"))
    procs = [a_proc]
    try:
        assert a["ready"]
        b_proc, b = _up(runtime, write_scenario(tmp_path, B, "b.yaml"))
        procs.append(b_proc)
        assert b["ready"]
        assert Path(a["state"]).parent != Path(b["state"]).parent
        assert a["socket"] != b["socket"]
        # Each client sees its own node; commands reach the node they name.
        command(a["socket"], {"op": "set", "device": 0, "values": {"power_w": 321}})
        command(b["socket"], {"op": "set", "device": 0, "values": {"power_w": 42}})
        assert _client(a) == {"count": 1, "name": "NVIDIA H100 80GB HBM3", "power": 321000}
        assert _client(b) == {"count": 2, "name": "Tesla T4", "power": 42000}
        # Naming a busy directory is refused, with the node in the way.
        a_dir = Path(a["state"]).parent
        c_proc, c = _up(runtime, tmp_path / "b.yaml", "--dir", str(a_dir))
        assert c["ready"] is False
        assert f"pid {a_proc.pid}" in c["error"] and "a.yaml" in c["error"]
        assert c_proc.wait(30) == 2
        # A SIGKILLed node leaves its directory (lock free): the next node reuses it.
        os.killpg(a_proc.pid, signal.SIGKILL)
        a_proc.wait(30)
        with Path(a["state"]).open("rb") as old:  # as a client still mapping A's state would
            d_proc, d = _up(runtime, tmp_path / "b.yaml", "--dir", str(a_dir))
            procs.append(d_proc)
            assert d["ready"] and Path(d["state"]).parent == a_dir
            # A's file was unlinked, not truncated and rewritten under its client.
            assert os.fstat(old.fileno()).st_nlink == 0
            assert Path(d["state"]).stat().st_ino != os.fstat(old.fileno()).st_ino
        assert _client(d)["name"] == "Tesla T4"
        assert _client(b)["power"] == 42000  # B untouched
    finally:
        for p in procs:
            _stop(p)
