"""A grpcio OTLP metrics sink for the ``send`` stage of ``cycle_cost``: a real gRPC server in
its own process, so the instructions callgrind counts in the sender's process are the
sender's alone.

``python -m tests.bench.sink_server`` prints the port it listens on (127.0.0.1) and serves
until its standard input closes. Every Export is answered OK with an empty
``ExportMetricsServiceResponse``, unread, as a collector that accepts everything.
"""

from __future__ import annotations

import sys
from concurrent import futures

import grpc

METHOD = "Export"
SERVICE = "opentelemetry.proto.collector.metrics.v1.MetricsService"


def _export(request: bytes, context: grpc.ServicerContext) -> bytes:
    return b""  # an empty ExportMetricsServiceResponse


def main() -> int:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        METHOD: grpc.unary_unary_rpc_method_handler(_export)})  # bytes in, bytes out
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()  # until the parent closes it
    server.stop(None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
