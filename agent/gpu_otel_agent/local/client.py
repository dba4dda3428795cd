"""The client side of the local endpoint (``gpu-agent top``, ``gpu-agent check``)."""

from __future__ import annotations

import errno
import json
import socket
from pathlib import Path
from typing import Any

Json = dict[str, Any]


class LocalClientError(Exception):
    """The agent could not be asked; the message says why in a person's words."""


class LocalClientDenied(LocalClientError):
    """An agent's socket is there, but this user may not open it."""


def get(path: Path, target: str, timeout: float = 3.0) -> Json:
    """``GET target`` on the agent's socket at ``path``; the JSON document it answers."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout)
    try:
        try:
            client.connect(str(path))
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
        client.sendall(f"GET {target} HTTP/1.0\r\nHost: agent\r\n\r\n".encode("ascii"))
        chunks = []
        while chunk := client.recv(65536):
            chunks.append(chunk)
    except TimeoutError:
        raise LocalClientError(f"the agent at {path} did not answer within {timeout:g}s") from None
    except OSError as error:
        raise LocalClientError(f"reading from {path} failed: {error.strerror}") from None
    finally:
        client.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    try:
        document: Json = json.loads(body)
    except ValueError:
        raise LocalClientError(f"{path} answered something that is not JSON") from None
    if len(status) < 2 or status[1] != b"200":
        raise LocalClientError(f"{target}: {document.get('error', 'failed')}")
    return document
