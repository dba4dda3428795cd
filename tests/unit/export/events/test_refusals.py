"""What the collector answers decides what happens to an event, against real receivers (a
grpcio OTLP server and the HTTP one): a record refused for good is quarantined and the queue
goes on, across restarts; a requested delay holds every sender to that collector, metrics and
events alike; RESOURCE_EXHAUSTED without a RetryInfo is final (OTLP)."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import Message
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.events.dead_letter import NAME as DEAD_LETTER
from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.senders import OtlpEventSender
from gpu_otel_agent.export.otlp.senders import RequestSender, build_request_sender
from gpu_otel_agent.export.otlp.target import OtlpTarget, resolve_target
from gpu_otel_agent.export.otlp.throttle import gate_for
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from tests.polling import wait_until as wait
from tests.receivers import decode
from tests.receivers.otlp_grpc import Answer, OtlpGrpcReceiver, throttled
from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.receivers.records import Signal
from tests.unit.export.events.pushing import run_pusher

RESOURCE = Resource.create({"service.name": "gpu-otel-agent"})
POISON = 13


def xid(i: int, code: int) -> HealthEvent:
    return HealthEvent("gpu.xid", 1_700_000_000_000_000_000 + i, Severity.ERROR,
                       f"xid {code} #{i}", (("gpu.xid.code", code), ("n", i)))


def target(protocol: str, endpoint: str, signal: str, **env: str) -> OtlpTarget:
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
               "OTEL_EXPORTER_OTLP_TIMEOUT": "2", **env}
    return resolve_target(load(None, environ={}), environ, signal)


def codes(request: Message) -> list[object]:
    return [e.attributes.get("gpu.xid.code") for e in decode.log_events(request, 0.0)]  # type: ignore[arg-type]


def refuse_poison(signal: Signal, request: Message) -> Answer | None:
    if signal == "logs" and POISON in codes(request):
        return Answer(grpc.StatusCode.INVALID_ARGUMENT, "record 13 is malformed")
    return None


@pytest.fixture
def grpc_receiver() -> Iterator[OtlpGrpcReceiver]:
    with OtlpGrpcReceiver() as receiver:
        yield receiver


def accepted_numbers(receiver: OtlpGrpcReceiver) -> list[object]:
    return [e.attributes["n"] for r in receiver.store.received("logs", accepted=True)
            for e in decode.log_events(r.request, r.received_at)]  # type: ignore[arg-type]


def test_a_record_refused_for_good_is_quarantined_and_the_queue_moves_on_across_restarts(
    grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    grpc_receiver.answer_with(refuse_poison)
    spool_dir = tmp_path / "spool"
    before = [xid(0, 31), xid(1, POISON), xid(2, 43)]
    after = [xid(i, 45) for i in range(3, 13)]

    def scenario(pusher: EventPusher) -> None:
        for event in before:
            pusher.submit(event)
        wait(lambda: {0, 2} <= set(accepted_numbers(grpc_receiver)))
        for event in after:  # the ten XIDs after the poison record all arrive
            pusher.submit(event)
        wait(lambda: set(range(3, 13)) <= set(accepted_numbers(grpc_receiver)))

    sender = OtlpEventSender(build_request_sender(target("grpc", grpc_receiver.endpoint,
                                                         "LOGS")), LogEncoder(RESOURCE))
    pusher = run_pusher(sender, spool_dir, scenario)
    assert pusher.dead_letters.stats.quarantined == {"INVALID_ARGUMENT": 1}
    lines = (spool_dir / DEAD_LETTER).read_bytes().splitlines()
    assert len(lines) == 1
    crc, _, payload = lines[0].partition(b" ")
    assert int(crc, 16) == zlib.crc32(payload)
    kept = json.loads(payload)
    assert kept["code"] == "INVALID_ARGUMENT" and kept["event"]["u"] == before[1].uid
    assert not list(spool_dir.glob("seg-*"))  # nothing left to re-offer
    refused = len(grpc_receiver.store.received("logs", accepted=False))

    # A restart re-offers nothing: the poison record does not come back.
    sender = OtlpEventSender(build_request_sender(target("grpc", grpc_receiver.endpoint,
                                                         "LOGS")), LogEncoder(RESOURCE))
    run_pusher(sender, spool_dir, lambda pusher: pusher.submit(xid(20, 31)) or wait(
        lambda: 20 in accepted_numbers(grpc_receiver)))
    assert len(grpc_receiver.store.received("logs", accepted=False)) == refused
    assert sorted(accepted_numbers(grpc_receiver)) == [0, 2, *range(3, 13), 20]


def test_over_http_a_400_for_one_record_quarantines_it_and_the_rest_arrive(
    tmp_path: Path,
) -> None:
    with OtlpHttpReceiver() as receiver:
        receiver.status_for = lambda signal, request: (
            400 if signal == "logs" and POISON in codes(request) else None)
        sender = OtlpEventSender(build_request_sender(target(
            "http/protobuf", receiver.endpoint, "LOGS")), LogEncoder(RESOURCE))

        def accepted() -> set[object]:
            return {e.attributes["n"] for r in receiver.store.received("logs", accepted=True)
                    for e in decode.log_events(r.request, r.received_at)}  # type: ignore[arg-type]

        def scenario(pusher: EventPusher) -> None:
            for i, code in enumerate([31, POISON, 43, 45]):
                pusher.submit(xid(i, code))
            wait(lambda: accepted() >= {0, 2, 3})

        pusher = run_pusher(sender, tmp_path / "spool", scenario)
    assert pusher.dead_letters.stats.quarantined == {"HTTP 400": 1}


def test_an_event_whose_encoding_raises_is_quarantined_not_retried_forever(
    tmp_path: Path,
) -> None:
    accepted: list[HealthEvent] = []

    class Fragile:
        def send(self, events: Sequence[HealthEvent]):  # type: ignore[no-untyped-def]
            from gpu_otel_agent.export.otlp.retry import Attempt
            if any(e.attributes[0][1] == POISON for e in events):
                raise OverflowError("cannot encode")
            accepted.extend(events)
            return Attempt(ok=True)

        def shutdown(self) -> None:
            return None

    def scenario(pusher: EventPusher) -> None:
        for i, code in enumerate([31, POISON, 43, 45]):
            pusher.submit(xid(i, code))
        wait(lambda: len(accepted) == 3)

    pusher = run_pusher(Fragile(), tmp_path / "spool", scenario)  # type: ignore[arg-type]
    assert pusher.dead_letters.stats.quarantined == {"OverflowError": 1}
    assert [e.attributes[1][1] for e in accepted] == [0, 2, 3]


def _hammer(senders: Sequence[tuple[RequestSender, Callable[[], Message]]],
            seconds: float) -> None:
    """Both signals try to send, again and again, for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for sender, request in senders:
            sender.send(request(), 0.5)
        time.sleep(0.05)


def _requests() -> tuple[Callable[[], Message], Callable[[], Message]]:
    from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
    from tests.unit.export.metrics.test_otlp_proto import _snapshot

    return (lambda: ProtoEncoder(RESOURCE).encode(_snapshot(1)),
            lambda: LogEncoder(RESOURCE).encode([xid(0, 31)]))


@pytest.mark.parametrize("legacy", [False, True], ids=["status-details", "retryinfo-bin"])
def test_a_requested_delay_holds_metrics_and_events_to_that_collector(
    grpc_receiver: OtlpGrpcReceiver, legacy: bool,
) -> None:
    """RESOURCE_EXHAUSTED with a RetryInfo of 30 s (where grpc servers put it: the Status
    details of grpc-status-details-bin; or the older trailer): for the seconds that follow,
    neither the metric exporter nor the event sender sends anything to that collector."""
    first = [True]

    def once(signal: Signal, request: Message) -> Answer | None:
        if first[0]:
            first[0] = False
            return throttled(30.0, legacy=legacy)
        return None

    grpc_receiver.answer_with(once)
    metrics = build_request_sender(target("grpc", grpc_receiver.endpoint, "METRICS"))
    events = build_request_sender(target("grpc", grpc_receiver.endpoint, "LOGS"))
    metric_request, log_request = _requests()
    try:
        assert not metrics.send(metric_request(), 1.0).ok
        _hammer([(metrics, metric_request), (events, log_request)], 2.0)
    finally:
        metrics.shutdown()
        events.shutdown()
        gate_for(metrics.target.endpoint).hold(0.0, "test")  # type: ignore[attr-defined]
    assert len(grpc_receiver.store.received(accepted=None)) == 1  # the refused one only
    gate = gate_for(metrics.target.endpoint)  # type: ignore[attr-defined]
    assert gate.stats.throttled.get("RESOURCE_EXHAUSTED") == 1
    assert gate.stats.held > 0


def test_sending_resumes_once_the_requested_delay_has_passed(
    grpc_receiver: OtlpGrpcReceiver,
) -> None:
    first = [True]

    def once(signal: Signal, request: Message) -> Answer | None:
        if first[0]:
            first[0] = False
            return throttled(1.0, grpc.StatusCode.UNAVAILABLE)
        return None

    grpc_receiver.answer_with(once)
    events = build_request_sender(target("grpc", grpc_receiver.endpoint, "LOGS",
                                         OTEL_EXPORTER_OTLP_TIMEOUT="20"))
    _, log_request = _requests()
    try:
        assert events.send(log_request()).ok  # waited at the gate, then accepted
    finally:
        events.shutdown()
    refused, accepted = (grpc_receiver.store.received(accepted=False),
                         grpc_receiver.store.received(accepted=True))
    assert len(refused) == 1 and len(accepted) == 1
    assert accepted[0].received_at - refused[0].received_at >= 1.0


def test_resource_exhausted_without_retry_info_is_not_retried(
    grpc_receiver: OtlpGrpcReceiver,
) -> None:
    """OTLP: RESOURCE_EXHAUSTED is retryable only when the server sends a RetryInfo."""
    grpc_receiver.reject(grpc.StatusCode.RESOURCE_EXHAUSTED)
    events = build_request_sender(target("grpc", grpc_receiver.endpoint, "LOGS",
                                         OTEL_EXPORTER_OTLP_TIMEOUT="10"))
    _, log_request = _requests()
    try:
        outcome = events.send(log_request())
    finally:
        events.shutdown()
    assert not outcome.ok and not outcome.retryable and outcome.code == "RESOURCE_EXHAUSTED"
    assert not outcome.bad_content  # the collector's trouble, not the record's
    assert len(grpc_receiver.store.received(accepted=None)) == 1


def test_an_http_retry_after_holds_both_signals() -> None:
    with OtlpHttpReceiver() as receiver:
        receiver.reject(retry_after=30)
        metrics = build_request_sender(target("http/protobuf", receiver.endpoint, "METRICS"))
        events = build_request_sender(target("http/protobuf", receiver.endpoint, "LOGS"))
        metric_request, log_request = _requests()
        try:
            assert not metrics.send(metric_request(), 1.0).ok
            receiver.accept()
            _hammer([(metrics, metric_request), (events, log_request)], 2.0)
        finally:
            metrics.shutdown()
            events.shutdown()
        assert len(receiver.store.received(accepted=None)) == 1
