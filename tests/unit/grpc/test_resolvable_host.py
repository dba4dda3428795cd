"""grpc.connection.resolvable hands getaddrinfo what the idna codec would have made of the host
(the reference: ``host.encode("idna")``), or the str itself where only the codec can say; and a
connection opened by it reaches a local server by name and by address."""

from __future__ import annotations

import random
import socket
import string

from gpu_otel_agent.grpc.connection import resolvable, tcp_opener


def _hosts() -> list[str]:
    rng = random.Random(41)
    fixed = ["", "localhost", "127.0.0.1", "::1", "otel-collector.monitoring.svc.cluster.local",
             "a..b", ".lead", "trail.", "x" * 63, "x" * 64, f"{'y' * 63}.{'z' * 64}",
             f"{'y' * 64}.z", "bücher.example", "ÉCOLE.fr", "UPPER.Case.Host"]
    alphabet = string.ascii_letters + string.digits + "-._" + "é漢"
    randoms = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90)))
               for _ in range(3_000)]
    return fixed + randoms


def test_what_the_idna_codec_makes_of_the_host() -> None:
    passed_as_bytes = 0
    for host in _hosts():
        given = resolvable(host)
        if isinstance(given, bytes):
            passed_as_bytes += 1
            assert given == host.encode("idna"), host  # the codec's own answer, byte for byte
        else:
            assert given is host  # left to the codec (it encodes or raises, as before)
    assert passed_as_bytes > 500


def test_connects_by_name_and_by_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        for host in ("127.0.0.1", "localhost"):
            sock = tcp_opener(f"{host}:{port}", None)(10.0)
            try:
                accepted, _ = server.accept()
                accepted.close()
                assert sock.getpeername() == ("127.0.0.1", port)
            finally:
                sock.close()
