"""Where ``gpu-agent top`` reads from: the agent running on the node (its local endpoint), or
an agent of its own, read through the same endpoint: on a simulated node (``--simulate``), or,
when no agent answers, on this node itself (its real GPUs, or the simulated node of a
``gpu-agent sim up`` whose environment is set), as nvitop would.

Standalone mode starts ``gpu-agent run [--simulate SCENARIO] --exporter none`` as a child
with a private socket and no event spool: the same sampling, attribution and health pipeline
as on a node, exporting nothing and writing nothing but its private directory (removed at
exit), its log kept there so it never writes over the screen.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from gpu_otel_agent.local.client import Json, LocalClientError, get

STANDALONE_START_S = 60.0
STANDALONE_INTERVAL_S = 1.0  # seconds between reads of the child's fast group


class SourceError(Exception):
    """No agent to read from; the message says what to do."""


class Source:
    """An agent's local endpoint, and how to name it on screen."""

    def __init__(self, socket_path: Path, label: str, timeout: float = 3.0,
                 notes: tuple[str, ...] = ()) -> None:
        self.socket_path = socket_path
        self.label = label
        self._timeout = timeout
        # What a standalone agent warned about while starting (why pods are missing, what
        # it cannot see): its log is hidden from the screen, so top repeats these.
        self.notes = notes

    def snapshot(self) -> Json:
        return get(self.socket_path, "/v1/snapshot", self._timeout)

    def events(self, after: int) -> Json:
        return get(self.socket_path, f"/v1/events?after={after}", self._timeout)


SIMULATE_HINT = "without a GPU, try: gpu-agent top --simulate h100-8gpu (a simulated node " \
    "of gpu-otel-agent-simulator)"


class NoAgent(SourceError):
    """No agent answers at the socket (or this user may not open it)."""


def attached(socket_path: Path) -> Source:
    """The agent serving ``socket_path``; NoAgent when none answers."""
    try:
        agent = get(socket_path, "/v1/snapshot")["agent"]
    except LocalClientError as error:
        raise NoAgent(str(error)) from None
    node = f" on node {agent['node']}" if agent.get("node") else ""
    return Source(socket_path, f"attached to agent {agent.get('version', '?')} "
                               f"(pid {agent.get('pid', '?')}{node}) at {socket_path}")


def _what(scenario: Path | None, environ: Mapping[str, str]) -> str:
    if scenario is not None:
        return f"simulated node {scenario.name}"
    if environ.get("GPU_SIM_NODE"):  # the attach environment `gpu-agent sim up` printed
        return "sim up node"
    return "this node"


@contextlib.contextmanager
def standalone(scenario: Path | None, interval: float = STANDALONE_INTERVAL_S,
               why: str = "") -> Iterator[Source]:
    """An agent of our own on the simulated node of ``scenario`` (None: on this node's own
    GPUs, or the simulated node the environment attaches to), stopped at exit. ``why``: the
    reason it is not attached to an agent, said in the title."""
    what = _what(scenario, os.environ)
    directory = Path(tempfile.mkdtemp(prefix="gpu-agent-top-"))
    socket_path = directory / "agent.sock"
    env = {**os.environ,
           "GPU_AGENT_LOCAL_ENDPOINT_ENABLED": "true",
           "GPU_AGENT_LOCAL_SOCKET": str(socket_path),
           "PYTHONUNBUFFERED": "1"}
    env.pop("GPU_AGENT_EVENT_SPOOL", None)  # no spool (the file's null): top writes nothing
    config = directory / "agent.yaml"
    # Faster than a node's defaults: a person is watching (the processes group lists PIDs).
    config.write_text(f"groups:\n  fast: {{interval: {interval:g}}}\n"
                      f"  processes: {{interval: {interval:g}}}\n"
                      f"health:\n  spool_path: null\n", encoding="utf-8")
    log_path = directory / "agent.log"
    simulate = ["--simulate", str(scenario)] if scenario is not None else []
    with log_path.open("wb") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "gpu_otel_agent.cli", "run", *simulate,
             "--exporter", "none", "--config", str(config)],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # a Ctrl-C in top's terminal is top's to handle
    try:
        _wait_serving(child, socket_path, log_path, what)
        reason = f"; {why}" if why else ""
        yield Source(socket_path, f"standalone: {what} (pid {child.pid}{reason})",
                     notes=_warnings(log_path))
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        shutil.rmtree(directory, ignore_errors=True)


def _warnings(log_path: Path) -> tuple[str, ...]:
    """The messages of the WARNING lines of the agent's log so far (gpu_otel_agent/logs.py's format:
    ``date time LEVEL logger: message``), but the event spool's: top turned it off."""
    notes = []
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        head, sep, message = line.partition(": ")
        fields = head.split()
        if sep and len(fields) == 4 and fields[2] == "WARNING" \
                and not fields[3].startswith("gpu_otel_agent.export.events"):
            notes.append(message)
    return tuple(notes)


def _wait_serving(child: subprocess.Popen[bytes], socket_path: Path, log_path: Path,
                  what: str) -> None:
    deadline = time.monotonic() + STANDALONE_START_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise SourceError(f"sampling {what} failed: its agent exited ({child.returncode}):"
                              f"\n{tail.rstrip()}")
        with contextlib.suppress(LocalClientError):
            if get(socket_path, "/v1/snapshot")["devices"]:
                return
        time.sleep(0.2)
    raise SourceError(f"sampling {what}: its agent did not serve {socket_path} within "
                      f"{STANDALONE_START_S:g}s (log: {log_path})")
