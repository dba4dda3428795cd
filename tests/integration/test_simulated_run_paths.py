"""A simulated run never writes where a real agent keeps its state.

As root, ``run --simulate``, ``top --simulate`` and ``check --simulate`` each run for real in a
mount namespace of their own whose ``/var/lib`` and ``/run`` are empty directories of the test:
whatever the commands create under the production paths (``/var/lib/gpu-otel-agent``,
``/run/gpu-otel-agent``) lands there, where the test sees it, and nowhere on the machine. The
``run`` case sends its health events to a collector that is not there, so a simulated XID
waits in a spool, which must be the simulated node's (and go with it).
"""

from __future__ import annotations

import glob
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.extensions.simulation import PRODUCTION_DIRS
from tests.cuda_standin.driver import can_unshare_mount
from tests.polling import wait_until

CLI = [sys.executable, "-m", "gpu_otel_agent.cli"]
# In a private mount namespace: an empty /var/lib and /run of the test's, then the command.
ISOLATE = ('mount --bind "$1" /var/lib && mount --bind "$2" /run && shift 2 && exec "$@"')


@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[tuple[list[str], list[Path], dict[str, str]]]:
    """The command prefix, the directories standing in for /var/lib and /run, and an
    environment whose well-known simulator paths are the test's own."""
    if os.geteuid() != 0:
        pytest.skip("unshare --mount is not permitted here: mounting needs root")
    why = can_unshare_mount()
    if why is not None:
        pytest.skip(why)
    roots = [tmp_path / "var-lib", tmp_path / "run"]
    for root in roots:
        root.mkdir()
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPU_SIM_", "GPU_AGENT_", "OTEL_")) and k != "LD_LIBRARY_PATH"}
    env.update(XDG_RUNTIME_DIR=str(xdg), COLUMNS="80", PYTHONUNBUFFERED="1")
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", ISOLATE, "isolate",
              *(str(r) for r in roots)]
    yield prefix, roots, env


def _written(roots: list[Path]) -> list[str]:
    return sorted(str(p) for root in roots for p in root.rglob("*"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_production_paths_are_those_the_isolation_covers() -> None:
    assert [str(d) for d in PRODUCTION_DIRS] == ["/var/lib/gpu-otel-agent",
                                                  "/run/gpu-otel-agent"]


def test_run_simulate_as_root_keeps_its_spool_and_socket_with_its_node(
        isolated: tuple[list[str], list[Path], dict[str, str]], tmp_path: Path) -> None:
    prefix, roots, env = isolated
    temporary = tmp_path / "tmp"  # where the simulated node makes its directory
    temporary.mkdir()
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
               TMPDIR=str(temporary))
    log_path = tmp_path / "agent.log"
    with log_path.open("wb") as log:
        agent = subprocess.Popen([*prefix, *CLI, "run", "--simulate", "h100-8gpu"], env=env,
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    segments = [*(str(r / "**/seg-*.jsonl") for r in roots),
                str(temporary / "gpusim-*/**/seg-*.jsonl")]

    def spooled() -> list[Path]:
        """Spool segments holding the XID, wherever the run put them."""
        assert agent.poll() is None, log_path.read_text(errors="replace")
        return [Path(p) for pattern in segments for p in glob.glob(pattern, recursive=True)
                if "gpu.xid" in Path(p).read_text(errors="replace")]

    def sim(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, "sim", *argv], env=env, capture_output=True, text=True,
                              timeout=60, check=False)

    try:
        wait_until(lambda: agent.poll() is None and sim("stats").returncode == 0,
                   what="the simulated node never answered")
        wait_until(lambda: "local endpoint on" in log_path.read_text(errors="replace"),
                   what="the agent never served its local socket")
        # A fault while the collector is away: the event waits in a spool.
        xid = sim("xid", "--device", "2", "--code", "79")
        assert xid.returncode == 0, xid.stderr
        wait_until(lambda: bool(spooled()), what="the XID never reached a spool")
        (segment,) = {p.parent for p in spooled()}
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=60) == 0, log_path.read_text(errors="replace")
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert _written(roots) == []
    text = log_path.read_text(errors="replace")
    local = re.search(r"simulated run: event spool \S+, local socket (\S+) ", text)
    assert local is not None, text
    assert segment.parent == Path(local.group(1)).parent  # with the node: its agent directory
    assert not segment.exists(), "the simulated node's spool outlived its node"


@pytest.mark.parametrize("command", [["top", "--simulate", "h100-8gpu", "--once"],
                                     ["check", "--simulate", "h100-8gpu"]],
                         ids=["top", "check"])
def test_top_and_check_on_a_simulated_node_as_root_write_nothing_there(
        isolated: tuple[list[str], list[Path], dict[str, str]], command: list[str]) -> None:
    prefix, roots, env = isolated
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run([*prefix, *CLI, *command], env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert "H100" in done.stdout or "event spool" in done.stdout, done.stdout + done.stderr
    assert _written(roots) == []
