"""The local endpoint: a read-only Unix socket serving small JSON documents to local tools.

Protocol: HTTP/1.1 (and 1.0) on the Unix socket, served by the same bounded server as the
Prometheus endpoint (``http_server/connections.py``), so ``curl --unix-socket PATH
http://agent/v1/snapshot`` works too. Answers are ``application/json``; each connection
serves one request and is closed. Only ``GET`` (and ``HEAD``) exist (anything else is 405:
nothing here changes the agent). Unknown paths are 404, a bad query is 400, a request head over
8 KiB is 431; every error body is ``{"error": "<what went wrong>", "routes": [...]}``.

The routes are a table of path -> handler (``routes.py``); a handler gets the query parameters
and returns a JSON-able dict. ``/v1/snapshot`` and ``/v1/events`` are the core's.

Security: the socket names other users' processes, pods and jobs, so it is mode 0660, owned by
the agent's user (root on a node) and the configured group, never world-readable. The mode and
group are set between ``bind`` and ``listen``, so no client can connect before they hold. A
world-writable directory is refused (anyone could replace the socket with their own), and so is
a path held by another live agent or by something that is not a socket.

Cost: the server's loop thread, idle in ``epoll`` while nobody connects, and one worker thread
started at the first request. Requests are served off the agent's event loop, each bounded by
the server's timeouts, and read only what the agent already holds (no GPU library call).
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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gpu_otel_agent import unix_socket
from gpu_otel_agent.http_server.connections import HttpServer, Limits, Request, Response

log = logging.getLogger(__name__)

Json = dict[str, Any]
# A route: the request's query parameters in, a JSON-able document out. Raise ValueError for a
# bad parameter (the client gets 400 and the message).
Route = Callable[[Mapping[str, str]], Json]

SOCKET_MODE = 0o660
DIRECTORY_MODE = 0o755
CLIENT_TIMEOUT_S = 2.0
# One short request per connection from a local tool: a small head, a short wait, one worker.
LIMITS = Limits(max_connections=64, workers=1, header_timeout=CLIENT_TIMEOUT_S,
                idle_timeout=CLIENT_TIMEOUT_S, write_timeout=CLIENT_TIMEOUT_S,
                max_head_bytes=8192)


class LocalEndpointError(Exception):
    """The endpoint cannot start; the message says why and what to change."""


class LocalEndpointTaken(LocalEndpointError):
    """Another live process serves the socket; it may be taken over once that one is gone."""


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
        unix_socket.connect(probe, path)
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
    raise LocalEndpointTaken(f"{path} is served by another process (another agent?)")


def _unlink_stale(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        raise LocalEndpointError(f"{path} is a stale socket (nothing listens) that cannot be "
                                 f"removed: {error.strerror}") from None


def _json(status: int, document: Json) -> Response:
    body = json.dumps(document, separators=(",", ":")).encode() + b"\n"
    return Response(status, body, "application/json", close=True)


class LocalEndpoint:
    def __init__(self, path: Path, group: str | None, routes: Mapping[str, Route]) -> None:
        self.path = path
        self._group = group
        self._routes = dict(routes)
        self._server: HttpServer | None = None

    def start(self) -> None:
        """Raises LocalEndpointError with what to change when the socket cannot be served."""
        # A path longer than a socket address holds is bound through its directory
        # (``unix_socket``); only a file name too long for even that is refused, up front.
        try:
            unix_socket.check(self.path)
        except unix_socket.UnixPathTooLong as error:
            raise LocalEndpointError(f"{error.strerror} (local_endpoint.socket)") from None
        gid = resolve_group(self._group)
        _check_directory(self.path.parent)
        _clear_stale(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            unix_socket.bind(listener, self.path)
            # Before listen(): until then a connect is refused, so the mode holds from the
            # first client on.
            os.chmod(self.path, SOCKET_MODE)
            if gid is not None:
                os.chown(self.path, -1, gid)
            listener.listen(16)
            server = HttpServer(listener, self._answer, lambda: None, lambda: {}, LIMITS,
                                error=self._refused, name="local-endpoint",
                                worker_name="local-endpoint-worker")
            server.start()
        except OSError as error:
            listener.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise LocalEndpointError(f"cannot serve {self.path}: {error.strerror}") from None
        self._server = server
        log.info("local endpoint on %s (read-only: %s)", self.path, ", ".join(self._routes))

    @property
    def requests(self) -> int:
        return self._server.requests if self._server is not None else 0

    def stop(self) -> None:
        server = self._server
        if server is None:
            return
        server.stop()
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._server = None

    def _refused(self, status: int, message: str) -> Response:
        return _json(status, {"error": message, "routes": sorted(self._routes)})

    def _answer(self, request: Request) -> Response:
        """One request, in the server's worker thread."""
        url = urlsplit(request.target)
        route = self._routes.get(url.path)
        if route is None:
            return self._refused(404, f"no route {url.path}")
        try:
            return _json(200, route(dict(parse_qsl(url.query))))
        except ValueError as error:
            return self._refused(400, str(error))
        except Exception:  # a bug in a route must not take the endpoint down
            log.exception("local endpoint: route %s failed", url.path)
            return self._refused(500, f"route {url.path} failed (see the agent's log)")
