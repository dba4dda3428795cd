"""The local endpoint: a read-only Unix socket serving small JSON documents to local tools.

Protocol (HTTP/1.0 subset, so ``curl --unix-socket PATH http://agent/v1/snapshot`` works too):
the client connects, sends one request ``GET <path>[?<query>] HTTP/1.0`` followed by an empty
line, and reads one response, ``HTTP/1.0 <status>`` with ``Content-Type: application/json``
and ``Content-Length``, then the document; the server closes the connection. Only ``GET``
exists (anything else is 405: nothing here changes the agent). Unknown paths are 404, a bad
query is 400; every error body is ``{"error": "<what went wrong>", "routes": [...]}``.

The routes are a table of path -> handler (``routes.py``); a handler gets the query parameters
and returns a JSON-able dict. ``/v1/snapshot`` and ``/v1/events`` are the core's.

Security: the socket names other users' processes, pods and jobs, so it is mode 0660, owned by
the agent's user (root on a node) and the configured group, never world-readable. The mode and
group are set between ``bind`` and ``listen``, so no client can connect before they hold. A
world-writable directory is refused (anyone could replace the socket with their own), and so is
a path held by another live agent or by something that is not a socket.

Cost: one daemon thread blocked in ``accept``; nothing runs while nobody connects. Requests are
served one at a time on that thread, off the event loop, each bounded by a socket timeout, and
read only what the agent already holds (no GPU library call).
"""

from __future__ import annotations

import contextlib
import errno
import grp
import json
import logging
import os
import socket
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gpu_otel_agent.threads.supervised import SupervisedThread

log = logging.getLogger(__name__)

Json = dict[str, Any]
# A route: the request's query parameters in, a JSON-able document out. Raise ValueError for a
# bad parameter (the client gets 400 and the message).
Route = Callable[[Mapping[str, str]], Json]

SOCKET_MODE = 0o660
DIRECTORY_MODE = 0o755
MAX_REQUEST_BYTES = 8192
CLIENT_TIMEOUT_S = 2.0
# sockaddr_un.sun_path is 108 bytes on Linux, with the terminating NUL.
MAX_PATH_BYTES = 107
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}


class LocalEndpointError(Exception):
    """The endpoint cannot start; the message says why and what to change."""


def resolve_group(group: str | None) -> int | None:
    """A group name or number as a gid (None: leave the agent's own group)."""
    if group is None:
        return None
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise LocalEndpointError(
            f"local_endpoint.group: no group named {group!r} on this host") from None


def _check_directory(directory: Path) -> None:
    if not directory.exists():
        try:
            directory.mkdir(mode=DIRECTORY_MODE, parents=True)
        except OSError as error:
            raise LocalEndpointError(
                f"cannot create the socket's directory {directory}: {error.strerror}") from None
    info = directory.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise LocalEndpointError(f"{directory} is not a directory")
    if info.st_mode & stat.S_IWOTH:
        raise LocalEndpointError(
            f"refusing to serve in {directory}: it is world-writable, so anyone could replace "
            f"the socket; choose a directory only its owner can write (local_endpoint.socket)")


def _clear_stale(path: Path) -> None:
    """Remove a socket left by an agent that died; never one in use or a file that is no
    socket."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except PermissionError:
        raise LocalEndpointError(f"permission denied looking into {path.parent} (another "
                                 f"user's agent owns it)") from None
    if not stat.S_ISSOCK(info.st_mode):
        raise LocalEndpointError(f"{path} exists and is not a socket; remove it or choose "
                                 f"another local_endpoint.socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError as error:
        # Only a refused connection proves nobody listens. Permission denied says nothing
        # about that: the socket is another user's (a root agent's, seen from a user's run),
        # and deleting it would cut that agent off from `gpu-agent top`.
        if error.errno == errno.ECONNREFUSED:
            _unlink_stale(path)
            return
        if error.errno in (errno.EACCES, errno.EPERM):
            raise LocalEndpointError(
                f"{path} belongs to another agent (permission denied connecting to it); "
                f"left as it is") from None
        raise LocalEndpointError(f"cannot tell whether {path} is in use: "
                                 f"{error.strerror}; left as it is") from None
    finally:
        probe.close()
    raise LocalEndpointError(f"{path} is served by another process (another agent?)")


def _unlink_stale(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        raise LocalEndpointError(f"{path} is a stale socket (nothing listens) that cannot be "
                                 f"removed: {error.strerror}") from None


def _response(status: int, document: Json) -> bytes:
    body = json.dumps(document, separators=(",", ":")).encode() + b"\n"
    head = (f"HTTP/1.0 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n")
    return head.encode("ascii") + body


class LocalEndpoint:
    def __init__(self, path: Path, group: str | None, routes: Mapping[str, Route]) -> None:
        self.path = path
        self._group = group
        self._routes = dict(routes)
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.requests = 0

    def start(self) -> None:
        """Raises LocalEndpointError with what to change when the socket cannot be served."""
        if len(os.fsencode(self.path)) > MAX_PATH_BYTES:
            raise LocalEndpointError(
                f"socket path {self.path} is longer than {MAX_PATH_BYTES} bytes (a Unix socket "
                f"limit); choose a shorter local_endpoint.socket")
        gid = resolve_group(self._group)
        _check_directory(self.path.parent)
        _clear_stale(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            # Before listen(): until then a connect is refused, so the mode holds from the
            # first client on.
            os.chmod(self.path, SOCKET_MODE)
            if gid is not None:
                os.chown(self.path, -1, gid)
            listener.listen(16)
        except OSError as error:
            listener.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise LocalEndpointError(f"cannot serve {self.path}: {error.strerror}") from None
        self._listener = listener
        self._thread = SupervisedThread(self._serve, "local-endpoint",
                                        stopping=self._stopping)
        self._thread.start()
        log.info("local endpoint on %s (read-only: %s)", self.path, ", ".join(self._routes))

    def stop(self) -> None:
        listener = self._listener
        if listener is None:
            return
        self._stopping.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the thread out of accept()
        listener.close()
        if self._thread is not None:
            self._thread.join(timeout=CLIENT_TIMEOUT_S + 1)
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._listener = None

    def _serve(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            try:
                connection, _ = listener.accept()
            except OSError as error:
                if self._stopping.is_set() or error.errno in (errno.EBADF, errno.EINVAL):
                    return
                log.warning("local endpoint: accept failed: %s", error)
                continue
            with connection:
                connection.settimeout(CLIENT_TIMEOUT_S)
                # A client that goes away or stalls loses its answer, nobody else's.
                with contextlib.suppress(OSError):
                    connection.sendall(self._answer(_read_request(connection)))
                self.requests += 1

    def _answer(self, request: bytes | None) -> bytes:
        routes = sorted(self._routes)
        if request is None:
            return _response(400, {"error": "request too long or incomplete",
                                   "routes": routes})
        parts = request.split(b"\n", 1)[0].decode("latin-1").strip().split()
        if len(parts) < 2:
            return _response(400, {"error": "expected: GET <path> HTTP/1.0", "routes": routes})
        method, target = parts[0], parts[1]
        if method != "GET":
            return _response(405, {"error": f"{method}: this endpoint is read-only (GET only)",
                                   "routes": routes})
        url = urlsplit(target)
        route = self._routes.get(url.path)
        if route is None:
            return _response(404, {"error": f"no route {url.path}", "routes": routes})
        try:
            return _response(200, route(dict(parse_qsl(url.query))))
        except ValueError as error:
            return _response(400, {"error": str(error), "routes": routes})
        except Exception:  # a bug in a route must not take the endpoint down
            log.exception("local endpoint: route %s failed", url.path)
            return _response(500, {"error": f"route {url.path} failed (see the agent's log)",
                                   "routes": routes})


def _read_request(connection: socket.socket) -> bytes | None:
    """The request head (up to the empty line); None if too long or cut short."""
    data = b""
    while True:
        chunk = connection.recv(1024)
        if not chunk:
            return data or None
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            return None
        if b"\r\n\r\n" in data or b"\n\n" in data:
            return data
