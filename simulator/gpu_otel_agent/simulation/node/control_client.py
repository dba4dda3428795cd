"""Client for a simulated node's control socket: one JSON object per line each way."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from gpu_otel_agent import unix_socket


class SimCommandError(RuntimeError):
    """The node answered ``{"ok": false, "error": ...}``."""


def default_socket_path() -> Path:
    """``$GPU_SIM_SOCKET``, else the well-known path ``gpu-agent sim up`` uses."""
    env = os.environ.get("GPU_SIM_SOCKET")
    if env:
        return Path(env)
    return default_state_dir() / "control.sock"


def default_state_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "gpu-otel-agent-sim"
    return Path("/tmp") / f"gpu-otel-agent-sim-{os.getuid()}"


def send(
    socket_path: Path | str, request: Mapping[str, object], timeout: float = 10.0
) -> dict[str, object]:
    """Send one request and return the decoded answer (``ok`` may be false)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        unix_socket.connect(s, socket_path)
        s.sendall(json.dumps(dict(request)).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    if not buf:
        raise ConnectionError(f"no answer from {socket_path}")
    reply = json.loads(buf)
    if not isinstance(reply, dict):
        raise ConnectionError(f"malformed answer from {socket_path}: {buf!r}")
    return reply


def command(socket_path: Path | str, request: Mapping[str, object]) -> dict[str, object]:
    """Like :func:`send` but raises SimCommandError on ``{"ok": false}``."""
    reply = send(socket_path, request)
    if not reply.get("ok"):
        raise SimCommandError(str(reply.get("error", "unknown error")))
    return reply
