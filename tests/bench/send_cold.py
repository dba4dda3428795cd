"""Thread CPU of one OTLP/gRPC export, back to back and after an idle gap (issue 41).

callgrind counts about 0.72 M instructions per export in the ``send`` stage of
``cycle_cost`` (200-300 us at this machine's speed), yet the running agent's "sending"
stage clock says 700-850 us. This shows where the difference comes from: the same exports
(the agent's own ``GrpcTransport``, inside ``Stage(SENDING)`` as ``OtlpSnapshotExporter``
sends, to the grpcio sink of ``cycle_cost``, ``tests.bench.sink_server``), timed with
``time.thread_time`` as the stage clock times them:

- ``back-to-back``: one export right after the other: its code and data stay in the caches;
- ``gap``: ``--gap-s`` of sleep before each export (the agent exports once a second, and
  its other threads and the machine's other processes run in between); not counted.

The instructions are the same in both; the thread time is not. ``--rounds`` alternates the
two so that the machine's load moves both alike.

``python -m tests.bench.send_cold --exports 300 --rounds 3`` prints JSON (us per export).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from gpu_otel_agent.export.otlp.grpc_transport import GrpcTransport
from gpu_otel_agent.export.otlp.senders import export_method
from gpu_otel_agent.export.otlp.target import OtlpTarget
from gpu_otel_agent.threads.costs import SENDING, Stage
from tests.bench.cycle_cost import WARM_EXPORTS

REQUEST_BYTES = 560_000  # an 8 GPU x 64 process export's size (the simulated node's)


def _transport(sink: str) -> GrpcTransport:
    target = OtlpTarget(protocol="grpc", signal="METRICS", endpoint=sink, tls=False,
                        headers=(), timeout_s=10.0, compression=None, certificate=None,
                        client_key=None, client_certificate=None)
    return GrpcTransport(target, export_method("METRICS"))


def _per_export_us(sink: str, exports: int, gap_s: float) -> float:
    """Thread CPU per export, ``gap_s`` of sleep before each (not counted)."""
    transport = _transport(sink)
    request = bytearray(os.urandom(REQUEST_BYTES))  # incompressible, as a mix of readings
    try:
        for _ in range(WARM_EXPORTS):  # connection open, HPACK tables steady
            if not transport.send(request).ok:
                raise RuntimeError(f"the sink at {sink} refused an export")
        spent = 0.0
        for _ in range(exports):
            if gap_s:
                time.sleep(gap_s)
            started = time.thread_time()
            with Stage(SENDING):
                ok = transport.send(request, 10.0).ok
            spent += time.thread_time() - started
            if not ok:
                raise RuntimeError(f"the sink at {sink} refused an export")
    finally:
        transport.shutdown()
    return round(spent / exports * 1e6, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--exports", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap-s", type=float, default=0.02)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"back-to-back": [], "gap": []}
    with subprocess.Popen([sys.executable, "-m", "tests.bench.sink_server"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None and server.stdin is not None
        try:
            sink = f"127.0.0.1:{int(server.stdout.readline())}"
            for _ in range(args.rounds):
                results["back-to-back"].append(_per_export_us(sink, args.exports, 0.0))
                results["gap"].append(_per_export_us(sink, args.exports, args.gap_s))
        finally:
            server.stdin.close()  # it stops when its input ends
            server.wait(timeout=30)
    print(json.dumps({"request_bytes": REQUEST_BYTES, "exports": args.exports,
                      "gap_s": args.gap_s, "thread_us_per_export": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
