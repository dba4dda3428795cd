"""Port helpers for receivers that run as separate processes."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the OS for a currently free port.

    Only needed when another process must bind it (rotel takes ports on its
    command line); in-process receivers bind port 0 directly and avoid the race.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    host: str, port: int, timeout: float, alive: Callable[[], bool] = lambda: True
) -> bool:
    """Poll until ``host:port`` accepts a TCP connection; False on timeout or if not alive()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return False
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.01)
    return False
