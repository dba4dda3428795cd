"""A run whose home cannot be written (a user without a home of their own, a read-only home):
the simulated node's compiled library goes to a private temporary cache, said in one log line,
instead of a PermissionError traceback.

As root the home is made read-only by a read-only bind mount in a mount namespace of the
test's own (root writes through a 0500 directory); as any other user, by its mode.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cuda_standin.driver import can_unshare_mount
from tests.polling import wait_until

CLI = [sys.executable, "-m", "gpu_otel_agent.cli"]
READ_ONLY = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"')


def _read_only(home: Path) -> list[str]:
    """The command prefix under which ``home`` cannot be written."""
    if os.geteuid() != 0:
        home.chmod(0o500)
        return []
    why = can_unshare_mount()
    if why is not None:
        pytest.skip(why)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", READ_ONLY,
            "read-only", str(home)]


def test_run_simulate_with_an_unwritable_home_uses_a_private_temporary_cache(
        tmp_path: Path) -> None:
    home, temporary, xdg = tmp_path / "home", tmp_path / "tmp", tmp_path / "xdg"
    for directory in (home, temporary, xdg):
        directory.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "LD_LIBRARY_PATH") and not k.startswith("GPU_SIM_")}
    env.update(HOME=str(home), TMPDIR=str(temporary), XDG_RUNTIME_DIR=str(xdg),
               GPU_AGENT_EVENT_SPOOL=str(tmp_path / "spool"),
               GPU_AGENT_LOCAL_SOCKET=str(tmp_path / "agent.sock"), PYTHONUNBUFFERED="1")
    log_path = tmp_path / "agent.log"
    with log_path.open("wb") as log:
        agent = subprocess.Popen(
            [*_read_only(home), *CLI, "run", "--simulate", "h100-8gpu", "--exporter", "none"],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        def serving() -> bool:
            assert agent.poll() is None, log_path.read_text(errors="replace")
            return "local endpoint on" in log_path.read_text(errors="replace")

        wait_until(serving, what="the agent never came up on the simulated node")
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=60) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        home.chmod(0o700)
    text = log_path.read_text(errors="replace")
    assert "Traceback" not in text and "PermissionError" not in text, text
    cache = temporary / f"gpu-otel-agent-cache-{os.geteuid()}"
    said = [line for line in text.splitlines() if "compiled-library cache" in line]
    assert len(said) == 1 and f"temporary cache {cache}/simnode" in said[0], said
    info = cache.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == os.geteuid()
    assert list(cache.glob("simnode/*/libnvidia-ml.so.1"))  # the library built there
    assert list(home.iterdir()) == []  # nothing was written into the home
