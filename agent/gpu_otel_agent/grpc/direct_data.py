"""DATA frames written from the request's own buffer, without a copy on the way to the socket.

h2's ``send_data`` copies a frame's payload five times before it reaches the socket (the
memoryview to bytes, the body join, header + body, its output buffer, ``data_to_send``'s
bytes): at 8 GPUs x 64 processes (a 275 kB request) that was 1.5 M of an export's 3.9 M
instructions, and each frame is a pass through h2's Python besides. Here the frames' 9-byte
headers are built by the client and the payload goes to a TCP socket by ``sendmsg``
straight from the request (scatter/gather: header, slice, header, slice ...), after what h2
has queued (the HEADERS frame, acknowledgements), so the order on the wire is kept. The
flow-control windows are charged as h2's ``send_data`` charges them, and the caller sends
the request's last piece through h2 (``send_data`` with END_STREAM), so the stream's state
moves on as before. TLS sockets have no ``sendmsg``: there the buffers are joined into
pieces of at most 64 KiB (one copy instead of five, each under glibc's mmap threshold).
Only over TCP (``scatters``): the kubelet's unix socket carries small requests through h2.

Private h2 state, pinned with ``h2>=4.1,<5`` and checked by tests/unit/grpc/
test_direct_data.py: a stream's ``outbound_flow_control_window`` (``H2Connection.streams``),
which ``local_flow_control_window`` reads and WINDOW_UPDATEs increase.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator

from h2.connection import H2Connection

from gpu_otel_agent.grpc.connection import left

_HEADER = struct.Struct(">HBBBL")  # length (24 bits, as 16 + 8), type, flags, stream id
_DATA = 0x0
_IOV_MAX = 512  # buffers per sendmsg (Linux allows 1024)
_JOINED = 65536  # TLS: bytes per write, under glibc's mmap threshold (no page faults)

Buffer = bytes | memoryview


def scatters(sock: socket.socket) -> bool:
    """Whether the client writes the frames to ``sock`` itself: TCP, plain or TLS (the OTLP
    collector's). Not a unix socket: the kubelet's requests are small, and only TCP is
    measured and tested so."""
    return sock.family in (socket.AF_INET, socket.AF_INET6)


def slices(prefix: bytes, body: memoryview, start: int, end: int) -> Iterator[Buffer]:
    """Bytes ``start:end`` of the framed message ``prefix + body``, without joining them."""
    if start < len(prefix):
        yield prefix[start:min(end, len(prefix))]
    body_start, body_end = max(start - len(prefix), 0), end - len(prefix)
    if body_end > body_start:
        yield body[body_start:body_end]


def data_frames(h2: H2Connection, stream_id: int, *, prefix: bytes, body: memoryview,
                start: int, end: int) -> list[Buffer]:
    """What h2 has queued, then bytes ``start:end`` of the framed message as DATA frames on
    ``stream_id`` (none with END_STREAM), for ``send_all``; h2's windows are charged with
    them now. The caller keeps ``end - start`` within ``h2.local_flow_control_window``."""
    buffers: list[Buffer] = []
    queued = h2.data_to_send()
    if queued:
        buffers.append(queued)
    most = h2.max_outbound_frame_size
    skip = len(prefix)
    pack, append = _HEADER.pack, buffers.append
    for frame_start in range(start, end, most):
        frame_end = min(frame_start + most, end)
        length = frame_end - frame_start
        append(pack(length >> 8, length & 0xFF, _DATA, 0, stream_id))
        if frame_start < skip:  # the first frame: the prefix too
            buffers.extend(slices(prefix, body, frame_start, frame_end))
        else:  # the rest, without a generator per frame (a 275 kB request has ~17)
            append(body[frame_start - skip:frame_end - skip])
    # As h2's send_data: the connection's window and the stream's (private, see above).
    h2.outbound_flow_control_window -= end - start
    h2.streams[stream_id].outbound_flow_control_window -= end - start
    return buffers


def send_all(sock: socket.socket, buffers: list[Buffer], deadline: float) -> None:
    """``sendall`` over several buffers (``sendmsg`` may take only part of them)."""
    if isinstance(sock, ssl.SSLSocket):
        _send_joined(sock, buffers, deadline)
        return
    views = list(buffers)  # every one a byte-format buffer: len() is its size
    first = 0
    while first < len(views):
        sock.settimeout(left(deadline))
        batch = views[first:first + _IOV_MAX] if first or len(views) > _IOV_MAX else views
        sent = sock.sendmsg(batch)
        if sent == sum(map(len, batch)):  # all of it (the usual case): no walk over them
            first += len(batch)
            continue
        while sent and first < len(views):
            size = len(views[first])
            if sent >= size:
                sent -= size
                first += 1
            else:
                views[first] = memoryview(views[first])[sent:]
                sent = 0


def _send_joined(sock: ssl.SSLSocket, buffers: list[Buffer], deadline: float) -> None:
    """TLS has no ``sendmsg``: the buffers go joined, ``_JOINED`` bytes at a time."""
    piece = bytearray()
    for buffer in buffers:
        view = memoryview(buffer)
        while view:
            room = _JOINED - len(piece)
            piece += view[:room]
            view = view[room:]
            if len(piece) == _JOINED:
                sock.settimeout(left(deadline))
                sock.sendall(piece)
                del piece[:]
    if piece:
        sock.settimeout(left(deadline))
        sock.sendall(piece)
