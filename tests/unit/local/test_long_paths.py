"""Unix sockets at paths longer than a socket address holds (108 bytes with its NUL on Linux):
bound and reached through their directory (``gpu_otel_agent.unix_socket``), with everything
around them (mode, stale-socket takeover, refusal of a live one, removal at stop) as on a short
path. Real sockets in pytest's temporary directory, made deep on purpose."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from gpu_otel_agent import unix_socket
from gpu_otel_agent.grpc.connection import unix_opener
from gpu_otel_agent.local.client import LocalClientError, get
from gpu_otel_agent.local.endpoint import LocalEndpoint, LocalEndpointError
from gpu_otel_agent.local.routes import Sources, build_routes
from gpu_otel_agent.model.snapshot import SnapshotStore

LENGTH = 150


def deep(base: Path, name: str, length: int = LENGTH) -> Path:
    """A path of ``length`` bytes ending in ``name``, its directories made (longer where the
    temporary directory itself is deep: the suite runs wherever it is cloned)."""
    room = max(1, length - len(os.fsencode(base)) - len(name) - 2)  # two separators
    directory = base / ("d" * room)
    directory.mkdir(mode=0o755)
    path = directory / name
    assert len(os.fsencode(path)) >= length
    return path


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_bind_and_connect_at_a_path_longer_than_a_socket_address(tmp_path: Path) -> None:
    path = deep(tmp_path, "s.sock")
    with pytest.raises(OSError, match="too long"):  # what the bug was: the plain call fails
        socket.socket(socket.AF_UNIX).bind(str(path))
    before = _open_fds()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        unix_socket.bind(server, path)
        server.listen(1)
        assert stat.S_ISSOCK(path.stat().st_mode)  # made in the real directory
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            unix_socket.connect(client, path)
            peer, _ = server.accept()
            with peer:
                client.sendall(b"ping")
                assert peer.recv(4) == b"ping"
    assert _open_fds() == before  # the directory's descriptor is closed again


def test_a_path_that_fits_is_used_as_it_is(tmp_path: Path) -> None:
    path = deep(tmp_path, "s.sock", unix_socket.MAX_PATH_BYTES)
    with unix_socket.address(path) as where:
        assert where == str(path)
    (tmp_path / "x").mkdir()
    longer = deep(tmp_path / "x", "s.sock", unix_socket.MAX_PATH_BYTES + 1)
    with unix_socket.address(longer) as where:
        assert where.startswith("/proc/self/fd/") and where.endswith("/s.sock")


def test_a_name_too_long_even_through_its_directory_is_named(tmp_path: Path) -> None:
    name = "n" * (unix_socket.MAX_NAME_BYTES + 1)
    path = deep(tmp_path, name)
    with pytest.raises(unix_socket.UnixPathTooLong) as raised:
        unix_socket.bind(socket.socket(socket.AF_UNIX), path)
    message = str(raised.value.strerror)
    assert str(path) in message and f"{len(os.fsencode(path))} bytes" in message
    assert f"{unix_socket.MAX_PATH_BYTES} bytes" in message
    assert f"at most {unix_socket.MAX_NAME_BYTES} bytes" in message
    assert not path.exists()
    # One byte shorter fits.
    with socket.socket(socket.AF_UNIX) as s:
        unix_socket.bind(s, path.with_name(name[:-1]))
    assert path.with_name(name[:-1]).exists()


def test_a_missing_directory_is_what_a_plain_connect_says(tmp_path: Path) -> None:
    path = deep(tmp_path, "s.sock")
    with socket.socket(socket.AF_UNIX) as s, pytest.raises(FileNotFoundError):
        unix_socket.connect(s, path.parent / "gone" / "s.sock")


def _endpoint(path: Path) -> LocalEndpoint:
    return LocalEndpoint(path, None, build_routes(Sources(SnapshotStore(), None, {})))


def test_the_local_endpoint_and_its_client_at_a_long_path(tmp_path: Path) -> None:
    path = deep(tmp_path, "agent.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_socket.bind(stale, path)
    stale.close()  # bound, never listening: what an agent killed with SIGKILL leaves
    first = _endpoint(path)
    first.start()  # the stale socket is taken over
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        assert get(path, "/v1/snapshot")["devices"] == []
        with pytest.raises(LocalEndpointError, match="served by another process"):
            _endpoint(path).start()
        assert get(path, "/v1/snapshot")["devices"] == []  # the live one was left alone
    finally:
        first.stop()
    assert not path.exists()  # removed at stop
    with pytest.raises(LocalClientError, match="no agent serves"):
        get(path, "/v1/snapshot")


def test_the_grpc_unix_opener_at_a_long_path(tmp_path: Path) -> None:
    path = deep(tmp_path, "kubelet.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        unix_socket.bind(server, path)
        server.listen(1)
        with unix_opener(str(path))(2.0) as sock:
            peer, _ = server.accept()
            with peer:
                sock.sendall(b"PRI")
                assert peer.recv(3) == b"PRI"
