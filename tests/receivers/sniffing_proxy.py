"""A tiny threaded TCP proxy that owns a receiver's public port.

It exists for two reasons: to observe gRPC compression on the wire (see
``h2sniff``), and to give "collector down" real semantics — stopping closes the
listener and every live connection, and restarting rebinds the *same* port
even though the gRPC server behind it gets a fresh ephemeral one.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.receivers.h2sniff import H2CompressionSniffer

_CHUNK = 65536


class SniffingProxy:
    """Forward ``host:port`` to ``target`` and sniff client bytes per connection."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._target: tuple[str, int] | None = None
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._by_upstream_port: dict[int, H2CompressionSniffer] = {}
        self._stopping = threading.Event()
        self._accept_thread: threading.Thread | None = None

    def start(self, target: tuple[str, int]) -> int:
        """Bind (reusing the previous port if any) and start accepting; returns the port."""
        self._target = target
        self._stopping.clear()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"otlp-proxy-{self.port}", daemon=True
        )
        self._accept_thread.start()
        return self.port

    def stop(self) -> None:
        """Close the listener and cut every open connection, like a dead collector."""
        self._stopping.set()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
            self._accept_thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
            self._by_upstream_port.clear()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def compression_for(self, upstream_port: int) -> tuple[bool, str | None]:
        """(known, compression) of the latest message on the connection using that port."""
        with self._lock:
            sniffer = self._by_upstream_port.get(upstream_port)
        if sniffer is None or sniffer.seen == 0:
            return False, None
        return True, sniffer.last

    def _accept_loop(self) -> None:
        assert self._listener is not None and self._target is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sniffer = H2CompressionSniffer()
            with self._lock:
                self._sockets |= {client, upstream}
                self._by_upstream_port[upstream.getsockname()[1]] = sniffer
            threading.Thread(
                target=self._pump, args=(client, upstream, sniffer), daemon=True
            ).start()
            threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, sniffer: H2CompressionSniffer | None
    ) -> None:
        """Copy one direction; sniff *before* forwarding so the handler sees the result."""
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                if sniffer is not None:
                    sniffer.feed(data)
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
