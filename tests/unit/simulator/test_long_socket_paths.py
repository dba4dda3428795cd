"""The simulator's control socket helpers at a path longer than a socket address holds (108
bytes on Linux): the state directory's probe tells absent, stale, live and other apart, a stale
socket is claimed, and the control client reaches a node there. Real sockets, in pytest's
temporary directory made deep on purpose."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from gpu_otel_agent import unix_socket
from gpu_otel_agent.simulation.node import control_client, statedir

LENGTH = 150


def _deep(base: Path, name: str) -> Path:
    # Longer than LENGTH where the temporary directory itself is deep.
    directory = base / ("d" * max(1, LENGTH - len(os.fsencode(base)) - len(name) - 2))
    directory.mkdir()
    path = directory / name
    assert len(os.fsencode(path)) >= LENGTH
    return path


def test_probe_and_claim_at_a_long_path(tmp_path: Path) -> None:
    path = _deep(tmp_path, "control.sock")
    assert statedir.probe(path) is statedir.SocketState.ABSENT
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_socket.bind(stale, path)
    stale.close()  # bound, never listening: a node killed outright
    assert statedir.probe(path) is statedir.SocketState.STALE
    statedir.claim_socket(path)
    assert not path.exists()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        unix_socket.bind(live, path)
        live.listen(1)
        assert statedir.probe(path) is statedir.SocketState.LIVE
        with pytest.raises(statedir.StateDirBusy, match="served by another simulated node"):
            statedir.claim_socket(path)
    assert path.exists()
    path.unlink()
    path.write_text("not a socket")
    assert statedir.probe(path) is statedir.SocketState.OTHER


def test_the_control_client_reaches_a_node_at_a_long_path(tmp_path: Path) -> None:
    path = _deep(tmp_path, "control.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        unix_socket.bind(server, path)
        server.listen(1)

        def answer() -> None:
            peer, _ = server.accept()
            with peer, peer.makefile("rwb") as stream:
                request = json.loads(stream.readline())
                stream.write(json.dumps({"ok": True, "echo": request}).encode() + b"\n")

        thread = threading.Thread(target=answer)
        thread.start()
        reply = control_client.command(path, {"op": "node"})
        thread.join(10)
    assert reply == {"ok": True, "echo": {"op": "node"}}
