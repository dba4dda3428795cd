"""A record above gRPC's message limit, against a real grpcio collector (its default limit:
4 MiB received per message). Answered RESOURCE_EXHAUSTED without a RetryInfo, it can never
be accepted: it is quarantined as HTTP's 413 is, and the events after it go on; a batch of
records that each fit is split below the limit instead of refused whole (issue 39, item 5)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from tests.polling import wait_until
from tests.receivers import decode
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.unit.export.events.pushing import grpc_event_sender, run_pusher

GRPC_DEFAULT_LIMIT = 4 * 1024 * 1024  # grpcio's max_receive_message_length default


def event(i: int, body_bytes: int = 10) -> HealthEvent:
    return HealthEvent("gpu.xid", 1_700_000_000_000_000_000 + i, Severity.ERROR,
                       "x" * body_bytes, (("gpu.xid.code", 31), ("n", i)))


@pytest.fixture
def receiver() -> Iterator[OtlpGrpcReceiver]:
    with OtlpGrpcReceiver() as started:
        yield started


def accepted(receiver: OtlpGrpcReceiver) -> list[object]:
    return [e.attributes["n"] for r in receiver.store.received("logs", accepted=True)
            for e in decode.log_events(r.request, r.received_at)]  # type: ignore[arg-type]


def run(receiver: OtlpGrpcReceiver, spool_dir: Path,
        scenario: Callable[[EventPusher], None]) -> EventPusher:
    return run_pusher(grpc_event_sender(receiver.endpoint, 5), spool_dir, scenario,
                      spool_bytes=64 << 20)


def test_a_record_that_can_never_fit_is_quarantined_and_later_events_arrive(
    receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    def scenario(pusher: EventPusher) -> None:
        pusher.submit(event(0, GRPC_DEFAULT_LIMIT + 1024))
        wait_until(lambda: sum(pusher.dead_letters.stats.quarantined.values()) == 1)
        pusher.submit(event(1))
        pusher.submit(event(2))
        wait_until(lambda: {1, 2} <= set(accepted(receiver)))

    pusher = run(receiver, tmp_path / "spool", scenario)
    assert pusher.dead_letters.stats.quarantined == {"RESOURCE_EXHAUSTED": 1}
    assert 0 not in accepted(receiver)


def test_a_batch_above_the_limit_is_split_and_every_record_arrives(
    receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    count, size = 24, 256 * 1024  # 6 MiB together, each far below the limit
    spool_dir = tmp_path / "spool"
    # One segment from before a restart: offered as one batch.
    spool = Spool(spool_dir, 64 << 20)
    spool.open()
    assert spool.append([event(i, size) for i in range(count)]).kept == count
    spool.sync()
    spool.close()

    def scenario(pusher: EventPusher) -> None:
        wait_until(lambda: set(range(count)) <= set(accepted(receiver)))

    pusher = run(receiver, spool_dir, scenario)
    assert pusher.dead_letters.stats.quarantined == {}
    assert all(len(r.request.SerializeToString()) < GRPC_DEFAULT_LIMIT
               for r in receiver.store.received("logs", accepted=True))
