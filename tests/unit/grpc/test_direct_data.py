"""DATA frames written by the client (``grpc.direct_data``) against h2's own ``send_data``.

The contract with h2's private state (a stream's ``outbound_flow_control_window``): after
frames written directly, h2's windows read as after the same bytes sent through h2, and
WINDOW_UPDATEs open them alike. What a server's h2 reads from the wire must be the same
message in frames it accepts (sizes within its SETTINGS, no flow-control error), ended by
h2's own END_STREAM frame. ``send_all`` must deliver every byte when ``sendmsg`` takes part.
"""

from __future__ import annotations

import random
import socket
import ssl
import threading
import time

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, StreamEnded
from h2.settings import SettingCodes

from gpu_otel_agent.grpc.direct_data import data_frames, scatters, send_all, slices
from gpu_otel_agent.grpc.messages import frame

MARGIN_S = 30.0


def _pair(max_frame: int, window: int) -> tuple[H2Connection, H2Connection]:
    """A client and a server that have exchanged their prefaces and SETTINGS."""
    client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    server = H2Connection(H2Configuration(client_side=False, header_encoding=None))
    client.initiate_connection()
    server.initiate_connection()
    server.update_settings({SettingCodes.MAX_FRAME_SIZE: max_frame,
                            SettingCodes.INITIAL_WINDOW_SIZE: window})
    if window > 65535:
        server.increment_flow_control_window(window - 65535)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    return client, server


def _open_stream(client: H2Connection) -> int:
    stream_id = client.get_next_available_stream_id()
    client.send_headers(stream_id, [(":method", "POST"), (":scheme", "http"),
                                    (":path", "/a.B/C"), (":authority", "x")])
    return stream_id


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Connected loopback TCP sockets, as the client's."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        left = socket.create_connection(listener.getsockname())
        right, _ = listener.accept()
    return left, right


@pytest.mark.parametrize(("max_frame", "window"), [(16384, 65535), (65536, 4 << 20),
                                                   (4 << 20, 4 << 20)])
def test_frames_written_directly_read_as_h2s_and_charge_its_windows(
        max_frame: int, window: int) -> None:
    rng = random.Random(max_frame)
    message = rng.randbytes(rng.randrange(200_000, 300_000))
    prefix, body = frame(message, gzip=False)
    total = len(prefix) + len(body)
    direct, server = _pair(max_frame, window)
    reference, _ = _pair(max_frame, window)
    left, right = _tcp_pair()
    stream, reference_stream = _open_stream(direct), _open_stream(reference)
    received, ended = bytearray(), False
    offset = 0
    with left, right:
        right.settimeout(MARGIN_S)
        while not ended:
            room = min(direct.local_flow_control_window(stream), total - 1 - offset)
            if room > 0:
                send_all(left, data_frames(direct, stream, prefix=prefix, body=memoryview(body),
                                           start=offset, end=offset + room),
                         time.monotonic() + MARGIN_S)
                for piece in slices(prefix, memoryview(body), offset, offset + room):
                    for start in range(0, len(piece), max_frame):
                        reference.send_data(reference_stream,
                                            bytes(piece[start:start + max_frame]))
                offset += room
                # h2's windows read the same as after its own send_data of those bytes.
                assert (direct.local_flow_control_window(stream)
                        == reference.local_flow_control_window(reference_stream))
            if offset == total - 1:
                direct.send_data(stream, memoryview(body)[-1:], end_stream=True)
                left.sendall(direct.data_to_send())
                offset = total
            data = right.recv(1 << 20)
            assert data
            for event in server.receive_data(data):
                if isinstance(event, DataReceived):
                    received += event.data or b""
                    server.acknowledge_received_data(event.flow_controlled_length or 0,
                                                     stream)
                ended = ended or isinstance(event, StreamEnded)
            update = server.data_to_send()
            direct.receive_data(update)  # WINDOW_UPDATEs open both alike
            reference.receive_data(update)
            if offset < total:
                assert (direct.local_flow_control_window(stream)
                        == reference.local_flow_control_window(reference_stream))
    assert bytes(received) == prefix + body


def test_send_all_delivers_every_byte_when_sendmsg_takes_part() -> None:
    rng = random.Random(7)
    buffers: list[bytes | memoryview] = [rng.randbytes(rng.randrange(1, 40_000))
                                         for _ in range(600)]  # more than one sendmsg takes
    buffers[3] = memoryview(buffers[3])[5:]
    want = b"".join(bytes(buffer) for buffer in buffers)
    left, right = _tcp_pair()
    got = bytearray()

    def reader() -> None:
        right.settimeout(MARGIN_S)
        while len(got) < len(want):
            chunk = right.recv(7000)  # small reads: sendmsg finds the buffer full
            if not chunk:
                return
            got.extend(chunk)

    with left, right:
        left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        thread = threading.Thread(target=reader)
        thread.start()
        send_all(left, buffers, time.monotonic() + MARGIN_S)
        thread.join(MARGIN_S)
    assert bytes(got) == want


def test_tcp_sockets_take_the_direct_path_unix_sockets_do_not() -> None:
    left, right = _tcp_pair()
    with left, right:
        assert scatters(left)
        wrapped = ssl.create_default_context().wrap_socket(
            left, server_hostname="x", do_handshake_on_connect=False)
        with wrapped:
            assert scatters(wrapped)  # joined 64 KiB at a time (no sendmsg over TLS)
    unix_left, unix_right = socket.socketpair()
    with unix_left, unix_right:
        assert not scatters(unix_left)
