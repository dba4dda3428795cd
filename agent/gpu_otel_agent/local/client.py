"""The client side of the local endpoint (``gpu-agent top``, ``gpu-agent check``).

``http.client`` over the Unix socket (standard library only, and ``unix_socket`` which is too: a
test runs these two modules alone as another user, and ``top`` starts fast without the agent's
dependencies).
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
from pathlib import Path
from typing import Any

from gpu_otel_agent import unix_socket

Json = dict[str, Any]


class LocalClientError(Exception):
    """The agent could not be asked; the message says why in a person's words."""


class LocalClientDenied(LocalClientError):
    """An agent's socket is there, but this user may not open it."""


class _UnixConnection(http.client.HTTPConnection):
    """``http.client`` on a Unix socket: only how it connects differs."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("agent", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            unix_socket.connect(sock, self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _connect(connection: _UnixConnection, path: Path) -> None:
    try:
        connection.connect()
    except FileNotFoundError:
        raise LocalClientError(f"no agent serves {path} (is it running? is "
                               f"local_endpoint.socket set to another path?)") from None
    except PermissionError:
        raise LocalClientDenied(f"permission denied opening {path}: run as root or as "
                                f"a member of its group (local_endpoint.group)") from None
    except OSError as error:
        if error.errno == errno.ECONNREFUSED:
            raise LocalClientError(f"nothing listens on {path} (the agent that made it has "
                                   f"stopped)") from None
        raise LocalClientError(f"cannot connect to {path}: {error.strerror}") from None


def get(path: Path, target: str, timeout: float = 3.0) -> Json:
    """``GET target`` on the agent's socket at ``path``; the JSON document it answers."""
    connection = _UnixConnection(path, timeout)
    try:
        _connect(connection, path)
        connection.request("GET", target)
        response = connection.getresponse()
        status, body = response.status, response.read()
    except TimeoutError:
        raise LocalClientError(f"the agent at {path} did not answer within {timeout:g}s") from None
    except http.client.HTTPException as error:
        raise LocalClientError(f"{path} answered something that is not HTTP: "
                               f"{error!r}") from None
    except OSError as error:
        raise LocalClientError(f"reading from {path} failed: {error.strerror}") from None
    finally:
        connection.close()
    try:
        document: Json = json.loads(body)
    except ValueError:
        raise LocalClientError(f"{path} answered something that is not JSON") from None
    if status != 200:
        raise LocalClientError(f"{target}: {document.get('error', 'failed')}")
    return document
