"""docs/gray-failures.md: the times it states are the defaults' (the slow interval, the reads in
a row), and its walkthrough works as written: an agent on the simulated node with a fast slow
group, two faults set from a second shell, `gpu-agent npd` naming the degraded GPU."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from gpu_otel_agent.config.table import default
from tests.polling import wait_until

DOC = Path(__file__).resolve().parents[2] / "docs" / "gray-failures.md"
SOCKET = "/tmp/gpu-agent-walkthrough.sock"  # the doc's; each test run gets its own instead


def _text() -> str:
    return " ".join(DOC.read_text(encoding="utf-8").split())


def test_the_stated_times_are_the_defaults() -> None:
    interval, reads = default("groups.slow.interval"), default("health.degrade_after")
    text = _text()
    assert f"(`groups.slow.interval`, {interval:g} s by default)" in text
    assert f"({reads} by default: {(reads - 1) * interval:g} to {reads * interval:g} s after " \
           f"a fault begins" in text
    assert f"defaults a condition is reported about {reads * interval:g} s after" in text


def _walkthrough() -> tuple[list[str], list[str]]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("Try it on the simulated node")
    blocks = re.findall(r"^```sh\n(.*?)^```", text[start:], re.MULTILINE | re.DOTALL)
    first, second = ([line for line in b.splitlines() if line.strip()] for b in blocks[:2])
    return first, second


def test_the_walkthrough_works_as_written(tmp_path: Path) -> None:
    first, second = _walkthrough()
    short = Path(tempfile.mkdtemp(prefix="gw-"))  # sun_path is 108 bytes; tmp_path may be long
    socket_path = short / "w.sock"
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("GPU_SIM_", "GPU_AGENT_"))},
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "XDG_RUNTIME_DIR": str(xdg), "COLUMNS": "80"}

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", line.replace(SOCKET, str(socket_path))],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    *setup, run = first
    for line in setup:
        assert shell(line).returncode == 0, line
    log = (tmp_path / "agent.log").open("wb")
    agent = subprocess.Popen(["bash", "-c", run.replace(SOCKET, str(socket_path))],
                             cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        *faults, check = second
        npd = check.split(";")[1].strip()  # the doc waits a fixed time; here: until it says so
        assert shlex.split(npd)[-1] == "npd", npd
        wait_until(lambda: shell(npd).returncode in (0, 1), what="npd never found the agent")
        for line in faults:
            done = shell(line)
            assert done.returncode == 0, done.stderr
        expected = check.split("#", 1)[1].strip().split(": ...")[0]  # "GPU 0 nvlink degraded"
        answers: list[subprocess.CompletedProcess[str]] = []

        def degraded() -> bool:
            answers[:] = [shell(npd)]
            return answers[0].returncode == 1

        wait_until(degraded, what="npd never reported the degraded GPU")
        assert answers[0].stdout.startswith(expected), answers[0].stdout
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(60)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
            log.close()
            shutil.rmtree(short, ignore_errors=True)
