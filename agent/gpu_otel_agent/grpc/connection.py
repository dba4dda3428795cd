"""The socket under the agent's gRPC client (``grpc.unary_client``): opening it, and HTTP/2 on it.

TCP (h2c with prior knowledge, or TLS with ALPN ``h2`` and the server's name verified) or a
unix socket (the kubelet's). Every blocking operation has a timeout equal to what is left of
the caller's deadline, so the socket never holds a call past it (``TimeoutError``).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
import time
from collections.abc import Callable

from h2.config import H2Configuration
from h2.connection import ConnectionState, H2Connection
from h2.errors import ErrorCodes
from h2.events import ConnectionTerminated, Event, PingAckReceived
from h2.exceptions import H2Error
from h2.settings import SettingCodes, Settings

from gpu_otel_agent import unix_socket
from gpu_otel_agent.grpc.header_blocks import BlockEncoder, KeptDecoder
from gpu_otel_agent.grpc.inbound_headers import InboundHeaders

WINDOW = 4 * 1024 * 1024  # what the server may send before we acknowledge it
KEEPALIVE_IDLE_S = 60  # TCP keepalive: first probe after this long without traffic
_READ = 65536
_FRAME_HEADER = 9  # length (3 bytes), type, flags, stream id (4)
_GOAWAY = 0x7  # its frame type

Opener = Callable[[float], socket.socket]  # a connected (TLS: handshaken) socket, in seconds


def left(deadline: float) -> float:
    """Seconds until ``deadline`` (a ``time.monotonic`` value); TimeoutError once past."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline exceeded")
    return remaining


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) -> (host, port); gRPC's default port (443) when none."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or "]" in port:
        host, port = endpoint, ""
    host = host.strip("[]")
    return host, int(port) if port else 443


def resolvable(host: str) -> str | bytes:
    """``host`` as ``socket.getaddrinfo`` takes it without importing the idna codec.

    getaddrinfo encodes a str host with the ``idna`` codec, whose module (with unicodedata and
    stringprep) is 0.4 MiB resident for the rest of the run (issue 41). For an ASCII host whose
    labels that codec accepts its answer is the ASCII bytes themselves (its fast path), so
    those are passed; any other host goes as str, to the codec as before.
    """
    if not host.isascii():
        return host
    raw = host.encode("ascii")
    labels = raw.split(b".")
    if all(0 < len(label) < 64 for label in labels[:-1]) and len(labels[-1]) < 64:
        return raw
    return host


def tcp_opener(endpoint: str, context: ssl.SSLContext | None) -> Opener:
    """Plain h2c when ``context`` is None, else TLS (the context offers ALPN ``h2``)."""
    host, port = split_endpoint(endpoint)
    address = resolvable(host)  # TLS still names the server by the str (ssl encodes it)

    def open_tcp(timeout_s: float) -> socket.socket:
        started = time.monotonic()
        # create_connection hands the host to getaddrinfo as it is; typeshed says str only.
        sock = socket.create_connection((address, port), timeout=timeout_s)  # type: ignore[arg-type]
        try:
            # Headers and small requests go out at once, not after a delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            keepalive(sock)
            if context is None:
                return sock
            sock.settimeout(max(timeout_s - (time.monotonic() - started), 1e-3))
            secure = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        if secure.selected_alpn_protocol() not in (None, "h2"):
            secure.close()
            raise ConnectionError(f"{endpoint} chose {secure.selected_alpn_protocol()!r} "
                                  "over TLS (ALPN), not HTTP/2")
        return secure

    return open_tcp


def keepalive(sock: socket.socket) -> None:
    """TCP keepalive probes on an idle connection (the kernel sends them; no thread of ours):
    they keep a NAT's or load balancer's state for it, and a peer that vanished turns the
    socket into an error the next call sees at once (``usable_after_idle``) instead of a
    request sent into nothing. Best effort: options a platform lacks are skipped."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", 20),
                        ("TCP_KEEPCNT", 3)):
        option = getattr(socket, name, None)
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, value)


def unix_opener(path: str) -> Opener:
    def open_unix(timeout_s: float) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout_s)
            unix_socket.connect(sock, path)
        except BaseException:
            sock.close()
            raise
        return sock

    return open_unix


def tls_context(cafile: str | None, certfile: str | None = None,
                keyfile: str | None = None) -> ssl.SSLContext:
    """Verifies the server (the CA bundle given, else the system's) and its host name;
    ALPN ``h2``, which gRPC servers require over TLS."""
    context = ssl.create_default_context(cafile=cafile)
    if certfile:
        context.load_cert_chain(certfile, keyfile)
    context.set_alpn_protocols(["h2"])
    return context


class Connection:
    """A socket and its HTTP/2 state; ``alive`` turns False for good once it fails."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.alive = True
        # The server's headers are normalised and validated by h2's own functions after it
        # reads them, and a block that repeats is not run through them again
        # (``inbound_headers``).
        self.h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None,
                                               normalize_inbound_headers=False,
                                               validate_inbound_headers=False))
        self._inbound_headers = InboundHeaders()
        self.outbound_checked = True  # h2's outbound header checks on (as configured here)
        # HPACK with request blocks written once and indexed answers kept (``header_blocks``;
        # private h2 attributes, pinned), set before anything is encoded or decoded.
        self.encoder = BlockEncoder()
        decoder = KeptDecoder(self.h2.decoder.max_header_list_size)
        decoder.max_allowed_table_size = self.h2.decoder.max_allowed_table_size
        self.h2.encoder, self.h2.decoder = self.encoder, decoder
        # Our receive window, announced in the preface: large answers (kubelet List) flow
        # without waiting for a WINDOW_UPDATE round trip every 64 KiB. No server push.
        self.h2.local_settings = Settings(client=True, initial_values={
            SettingCodes.ENABLE_PUSH: 0, SettingCodes.INITIAL_WINDOW_SIZE: WINDOW})
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(WINDOW - 65535)
        self._last_used = time.monotonic()
        self._inbound = bytearray()  # a frame not read whole yet
        # Registered once: ``readable`` runs before every call (``usable_after_idle``).
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)

    def used(self) -> None:
        """A call has just been answered on it."""
        self._last_used = time.monotonic()

    def idle_s(self) -> float:
        return time.monotonic() - self._last_used

    def ping(self, deadline: float) -> bool:
        """An HTTP/2 PING, answered by ``deadline``: the server at the other end is there.
        False (and not alive) when it does not answer in time or the connection fails."""
        payload = os.urandom(8)
        try:
            self.h2.ping(payload)
            self.flush(deadline)
            while self.alive:
                for event in self.read(deadline):
                    if isinstance(event, PingAckReceived) and event.ping_data == payload:
                        self._last_used = time.monotonic()
                        return True
                    if isinstance(event, ConnectionTerminated):
                        self.alive = False
        except (OSError, H2Error, ValueError):
            self.alive = False
        return False

    def flush(self, deadline: float) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.settimeout(left(deadline))
            self.sock.sendall(data)

    def read(self, deadline: float) -> list[Event]:
        """The events of the whole frames read now (one ``recv``).

        Frames go to h2 together up to a GOAWAY, which ends a batch: h2 closes its state
        machine on any GOAWAY (python-hyper/h2#1181) and then refuses every later frame, so
        the answer to a call the GOAWAY still covers, arriving in the same read, was lost.
        After a graceful GOAWAY (NO_ERROR) whose last stream id covers every stream we
        opened, the state is reopened for those streams; ``alive`` turns False, so no new
        call is made on it. (One frame at a time cost a pass through h2's ``receive_data``
        per frame: four per export, issue 41.)"""
        self.sock.settimeout(left(deadline))
        data = self.sock.recv(_READ)
        if not data:
            raise ConnectionResetError("the server closed the connection")
        # Usually nothing is left over from the last read and the read ends on a frame's
        # end: then ``data`` goes to h2 as it is, not through a buffer and two copies. A
        # frame that spans reads grows the buffer in place (not copied again on each read).
        pending: bytes | bytearray = data
        if self._inbound:
            self._inbound += data
            pending = self._inbound
        events: list[Event] = []
        while end := _batch(pending):
            frames, pending = pending[:end], pending[end:]
            received = self.h2.receive_data(frames)
            self._inbound_headers.check(received)  # h2's ProtocolError, as it raised it
            events += received
            for event in received:
                if isinstance(event, ConnectionTerminated):
                    self.alive = False
                    if self._covers_ours(event):
                        self.h2.state_machine.state = ConnectionState.CLIENT_OPEN
        self._inbound = pending if isinstance(pending, bytearray) else bytearray(pending)
        self.flush(deadline)  # SETTINGS and PING acknowledgements, WINDOW_UPDATEs
        return events

    def _covers_ours(self, event: ConnectionTerminated) -> bool:
        return (event.error_code == ErrorCodes.NO_ERROR and event.last_stream_id is not None
                and event.last_stream_id >= self.h2.highest_outbound_stream_id)

    def readable(self) -> bool:
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        return bool(self._poller.poll(0))

    def usable_after_idle(self, deadline: float) -> bool:
        """Reads what came while idle (SETTINGS, PING, GOAWAY, end of stream), not blocking
        for more; False when the server has ended the connection meanwhile."""
        try:
            while self.alive and self.readable():
                for event in self.read(deadline):
                    if isinstance(event, ConnectionTerminated):
                        self.alive = False
        except (OSError, H2Error, ValueError):
            self.alive = False
        return self.alive

    def abort(self) -> None:
        """Ends blocking reads and writes at once, from any thread."""
        self.alive = False
        with contextlib.suppress(OSError, ValueError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):
            self.sock.close()


def _batch(inbound: bytes | bytearray) -> int:
    """Bytes of the whole frames in ``inbound``, up to and including the first GOAWAY."""
    size = len(inbound)
    end = 0
    while size - end >= _FRAME_HEADER:
        following = end + _FRAME_HEADER + (
            inbound[end] << 16 | inbound[end + 1] << 8 | inbound[end + 2])  # its length
        if following > size:
            break
        kind, end = inbound[end + 3], following
        if kind == _GOAWAY:
            break
    return end
