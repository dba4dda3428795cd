"""Hostile peers of the agent's /metrics endpoint, for the tests and the benchmark suite alike:
TCP connections that never send a ClientHello, clients that guess passwords, and the resident
set of the process they are aimed at (issue 39)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def rss_mib(pid: int) -> float:
    """The process's resident set (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def silent_connections(port: int, count: int) -> list[socket.socket]:
    """``count`` TCP connections that send nothing (no ClientHello, no request)."""
    return [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(count)]


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed (or reset) the connection: a read gives EOF instead of waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.close()


def client_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the endpoint's certificate is self-signed
    return context


def get(port: int, path: str, auth: tuple[str, str] | None = None, *, tls: bool = True,
        timeout: float = 60.0) -> int:
    """One request on a new connection; the status."""
    connection: http.client.HTTPConnection = (
        http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                    context=client_context())
        if tls else http.client.HTTPConnection("127.0.0.1", port, timeout=timeout))
    headers = {}
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@dataclass
class PasswordFlood:
    """``clients`` threads sending wrong passwords to ``/metrics`` as fast as answered, each on
    a kept-alive connection (a guesser does not pay a handshake per guess)."""

    port: int
    clients: int
    user: str = "prometheus"
    tls: bool = True
    answers: list[tuple[float, int]] = field(default_factory=list)  # (monotonic, status)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> PasswordFlood:
        for index in range(self.clients):
            thread = threading.Thread(target=self._guess, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def answered(self) -> int:
        with self._lock:
            return len(self.answers)

    def refused_between(self, start: float, end: float) -> int:
        """Guesses answered 401 (a password check done) from ``start`` to ``end``."""
        with self._lock:
            return sum(1 for at, status in self.answers if start <= at <= end and status == 401)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _guess(self, index: int) -> None:
        guess = 0
        while not self._stop.is_set():
            connection: http.client.HTTPConnection = (
                http.client.HTTPSConnection("127.0.0.1", self.port, timeout=60,
                                            context=client_context())
                if self.tls else http.client.HTTPConnection("127.0.0.1", self.port, timeout=60))
            try:
                while not self._stop.is_set():
                    guess += 1
                    token = base64.b64encode(
                        f"{self.user}:guess-{index}-{guess}".encode()).decode()
                    connection.request("GET", "/metrics",
                                       headers={"Authorization": f"Basic {token}"})
                    response = connection.getresponse()
                    response.read()
                    with self._lock:
                        self.answers.append((time.monotonic(), response.status))
                    if response.getheader("Connection", "").lower() == "close":
                        break
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)  # refused or reset: try again on a new connection
            finally:
                connection.close()


def timed(call: Callable[[], int]) -> tuple[int, float, float]:
    """``call()``'s status, with the monotonic times it was sent and answered."""
    sent = time.monotonic()
    status = call()
    return status, sent, time.monotonic()
