"""Files the agent writes as root, against links another user planted (issue 39, item 4).

A real grpcio collector refuses one record for good, so the pusher quarantines it into the
dead letters. The spool directory belongs to another user (refused: nothing may be written
there), or was handed back to root with that user's symbolic links still in it (as
``chown -R`` leaves them): the files the links point at, root's, must not change.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import Message

from gpu_otel_agent.export.events.dead_letter import NAME as DEAD_LETTER
from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.storm import StormKey
from gpu_otel_agent.gpu_health.storm_journal import NAME as STORM_JOURNAL
from gpu_otel_agent.gpu_health.storm_journal import StormJournal
from tests.polling import wait_until
from tests.receivers import decode
from tests.receivers.otlp_grpc import Answer, OtlpGrpcReceiver
from tests.receivers.records import Signal
from tests.unit.export.events.pushing import grpc_event_sender, run_pusher

NOBODY = 65534
POISON = 13
VICTIM_TEXT = b"root's own file\n"


def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")


def _xid(i: int, code: int) -> HealthEvent:
    return HealthEvent("gpu.xid", 1_700_000_000_000_000_000 + i, Severity.ERROR,
                       f"xid {code} #{i}", (("gpu.xid.code", code), ("n", i),
                                            ("k8s.pod.name", "secret-pod")))


def _refuse_poison(signal: Signal, request: Message) -> Answer | None:
    events = decode.log_events(request, 0.0)  # type: ignore[arg-type]
    if signal == "logs" and any(e.attributes.get("gpu.xid.code") == POISON for e in events):
        return Answer(grpc.StatusCode.INVALID_ARGUMENT, "record 13 is malformed")
    return None


@pytest.fixture
def receiver() -> Iterator[OtlpGrpcReceiver]:
    with OtlpGrpcReceiver() as started:
        started.answer_with(_refuse_poison)
        yield started


def _plant(link: Path, target: Path) -> None:
    """A symbolic link that belongs to the other user, as if they had made it."""
    link.symlink_to(target)
    os.lchown(link, NOBODY, NOBODY)


def _victim(tmp_path: Path, name: str) -> Path:
    victim = tmp_path / name
    victim.write_bytes(VICTIM_TEXT)
    return victim


def _push(receiver: OtlpGrpcReceiver, spool_dir: Path,
          scenario: Callable[[EventPusher], None]) -> EventPusher:
    return run_pusher(grpc_event_sender(receiver.endpoint, 2), spool_dir, scenario)


def _quarantine_one(receiver: OtlpGrpcReceiver) -> Callable[[EventPusher], None]:
    def scenario(pusher: EventPusher) -> None:
        for i, code in enumerate([31, POISON, 43]):
            pusher.submit(_xid(i, code))
        wait_until(lambda: sum(1 for r in receiver.store.received("logs", accepted=True)
                               for _ in decode.log_events(r.request, 0.0)) >= 2)  # type: ignore[arg-type]
        wait_until(lambda: sum(pusher.dead_letters.stats.quarantined.values()) == 1)
    return scenario


def test_nothing_is_written_into_a_refused_spool_even_through_its_owners_link(
    receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    _as_root()
    spool_dir = tmp_path / "events"
    spool_dir.mkdir(mode=0o700)
    victim = _victim(tmp_path, "root-file")
    _plant(spool_dir / DEAD_LETTER, victim)
    os.chown(spool_dir, NOBODY, NOBODY)  # another user's directory: refused
    before = sorted(os.listdir(spool_dir))

    pusher = _push(receiver, spool_dir, _quarantine_one(receiver))
    assert pusher.dead_letters.stats.quarantined == {"INVALID_ARGUMENT": 1}
    assert pusher.dead_letters.stats.unkept == 1  # logged and counted, not written
    assert victim.read_bytes() == VICTIM_TEXT
    assert sorted(os.listdir(spool_dir)) == before  # not even a lock file


def test_links_left_in_a_spool_handed_back_to_root_are_not_followed(
    receiver: OtlpGrpcReceiver, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    _as_root()
    spool_dir = tmp_path / "events"
    spool_dir.mkdir(mode=0o700)
    dead_victim = _victim(tmp_path, "dead-letter-victim")
    journal_victim = _victim(tmp_path, "journal-victim")
    tmp_victim = _victim(tmp_path, "journal-tmp-victim")
    _plant(spool_dir / DEAD_LETTER, dead_victim)
    _plant(spool_dir / STORM_JOURNAL, journal_victim)
    _plant(spool_dir / (STORM_JOURNAL + ".tmp"), tmp_victim)

    # The storm journal, as the agent opens it once the spool is usable: it counts a storm.
    journal = StormJournal(spool_dir)
    assert journal.open() == []
    journal.count(StormKey("GPU-a", "gpu.xid", code=13), 1_000, 5)
    journal.close()
    assert journal_victim.read_bytes() == VICTIM_TEXT
    assert tmp_victim.read_bytes() == VICTIM_TEXT
    assert not (spool_dir / STORM_JOURNAL).is_symlink()  # its own file took the link's place

    pusher = _push(receiver, spool_dir, _quarantine_one(receiver))
    assert pusher.dead_letters.stats.quarantined == {"INVALID_ARGUMENT": 1}
    assert dead_victim.read_bytes() == VICTIM_TEXT
    assert "symbolic link, not followed" in caplog.text
