"""The running agent says why exports fail (issue 31): at WARNING, with the endpoint and the
cause in the words ``gpu-agent check`` uses, once per change of cause and rate-limited, and
once more when exports work again. Real transports against a real receiver on a real port."""

from __future__ import annotations

import logging

import pytest

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.otlp.failure_log import FailureLog
from gpu_otel_agent.export.otlp.senders import build_request_sender
from gpu_otel_agent.export.otlp.target import resolve_target
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.unit.export.metrics.test_otlp_proto import RESOURCE, _snapshot

LOGGER = "gpu_otel_agent.export"


def _request() -> bytes:
    from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder

    return ProtoEncoder(RESOURCE).encode(_snapshot(300.0)).SerializeToString()


def _failing(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and "failing" in r.getMessage()]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_refused_export_is_a_warning_naming_endpoint_and_cause_once(
        protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
               "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}
    sender = build_request_sender(resolve_target(load(None, environ={}), environ, "METRICS"))
    receiver: OtlpGrpcReceiver | OtlpHttpReceiver = (
        OtlpGrpcReceiver(port=port) if protocol == "grpc" else OtlpHttpReceiver(port=port))
    try:
        with caplog.at_level(logging.INFO, logger=LOGGER):
            for _ in range(3):  # each with its retries: one line for all of them
                assert not sender.send(_request(), timeout_s=0.5).ok
            (line,) = _failing(caplog)
            assert line.levelno == logging.WARNING
            assert f"127.0.0.1:{port}" in line.getMessage()
            assert "nothing listens there (connection refused)" in line.getMessage()
            receiver.start()
            assert sender.send(_request(), timeout_s=10).ok
            assert any(r.getMessage().endswith("recovered") for r in caplog.records
                       if r.name == LOGGER)
    finally:
        receiver.stop()
        sender.shutdown()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_new_cause_is_reported_no_more_often_than_the_gap_and_a_lasting_one_reminded(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    failures = FailureLog("OTLP/gRPC metrics export", "collector:4317", min_gap_s=30,
                          remind_s=600, clock=clock)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        failures.failed("nothing listens there (connection refused)", "start the collector")
        clock.now = 5
        failures.failed("nothing listens there (connection refused)")
        failures.failed("no answer within 2s")  # a new cause within the gap: held back
        clock.now = 40
        failures.failed("no answer within 2s")  # past the gap: reported
        clock.now = 100
        failures.failed("no answer within 2s")  # the same cause: quiet until the reminder
        clock.now = 700
        failures.failed("no answer within 2s")
        failures.succeeded()
        failures.succeeded()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "OTLP/gRPC metrics export to collector:4317 failing: nothing listens there "
        "(connection refused) -> start the collector",
        "OTLP/gRPC metrics export to collector:4317 failing: no answer within 2s",
        "OTLP/gRPC metrics export to collector:4317 failing: no answer within 2s (still; 2 "
        "failures since the last report)",
        "OTLP/gRPC metrics export to collector:4317 recovered",
    ]
