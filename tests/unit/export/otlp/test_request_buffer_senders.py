"""The metric encoder's request is its own ``bytearray`` (``ProtoEncoder.encode_request``),
sent as it is: the gRPC and HTTP transports take it without a copy into bytes, and a real
receiver gets exactly its bytes. Large enough (a node's processes) to go over several HTTP/2
flow-control windows and DATA frames written from the buffer itself (``grpc.direct_data``).
"""

from __future__ import annotations

import pytest

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.otlp.senders import build_request_sender
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.unit.export.otlp.test_otlp_transport import RESOURCE, _target


def _snapshot(step: int) -> NodeSnapshot:
    devices = []
    for index in range(2):
        identity = DeviceIdentity(f"GPU-{index}", index, "nvidia", "H100",
                                  f"0000:{index:02x}:00.0")
        processes = tuple(
            Reading("gpu.process.memory.usage", pid * 4096 + step,
                    (("process.pid", pid), ("process.executable.name", "python")))
            for pid in range(1_000 * index, 1_000 * index + 1_000))
        devices.append(DeviceSnapshot(identity, HealthState.OK, 10)
                       .with_sample(GroupSample("fast", (Reading("hw.power", 300.0 + step),),
                                                1_000 + step))
                       .with_sample(GroupSample("processes", processes, 1_001 + step)))
    return NodeSnapshot(tuple(devices), taken_ns=5_000 + step)


def _send_buffers(protocol: str, endpoint: str, compression: str) -> list[bytes]:
    """Three exports of one encoder (its buffer written over in place between them) on one
    sender; what each buffer held when it was sent."""
    encoder = ProtoEncoder(RESOURCE)
    sender = build_request_sender(_target(protocol, endpoint,
                                          OTEL_EXPORTER_OTLP_COMPRESSION=compression))
    sent = []
    try:
        for step in range(3):
            request = encoder.encode_request(_snapshot(step))
            assert isinstance(request, bytearray) and len(request) > 3 * 65_535
            held = bytes(request)
            assert sender.send(request).ok
            assert request == held  # read, never written, by the sender
            sent.append(held)
    finally:
        sender.shutdown()
    return sent


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_grpc_delivers_the_buffers_bytes(grpc_receiver: OtlpGrpcReceiver,
                                         compression: str) -> None:
    sent = _send_buffers("grpc", grpc_receiver.endpoint, compression)
    received = grpc_receiver.store.received()
    # opentelemetry-proto writes a decoded request back as the encoder wrote it.
    assert [r.request.SerializeToString() for r in received] == sent
    assert len(set(sent)) == 3


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_http_delivers_the_buffers_bytes(http_receiver: OtlpHttpReceiver,
                                         compression: str) -> None:
    sent = _send_buffers("http/protobuf", http_receiver.endpoint, compression)
    received = http_receiver.store.received()
    assert [r.request.SerializeToString() for r in received] == sent
    assert len(set(sent)) == 3
