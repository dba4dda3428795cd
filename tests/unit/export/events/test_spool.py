"""The on-disk event spool (the events' write-ahead log): bounded, ordered, private, survives
restarts, damage, a full disk and a read-only file system."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import zlib
from pathlib import Path

import pytest

from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.ulid import ulid
from tests.unit.export.events.disk import fill


def event(i: int) -> HealthEvent:
    return HealthEvent("gpu.xid", 1_700_000_000_000_000_000 + i, Severity.ERROR, f"XID {i}",
                       (("hw.id", "GPU-1"), ("gpu.xid.code", i), ("gpu.call.duration", 0.5),
                        ("process.pid", (1, 2)), ("process.executable.name", ("a", "b"))),
                       ulid(1_700_000_000_000, i.to_bytes(10, "big")))


def drain(spool: Spool) -> list[HealthEvent]:
    spool.sync()  # only durable segments are offered
    out = []
    while (oldest := spool.oldest()) is not None:
        number, events = oldest
        out.extend(events)
        spool.remove(number)
    return out


def test_events_round_trip_in_order_across_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.open()
    spool.append([event(1), event(2)])
    spool.append([event(3)])
    spool.close()
    again = Spool(tmp_path, 1 << 20)
    again.open()
    assert again.stats.records == 3
    assert drain(again) == [event(1), event(2), event(3)]
    assert again.stats.records == 0 and again.stats.resent == 3
    assert list(tmp_path.glob("seg-*")) == []


def test_a_closed_spool_offers_nothing_and_keeps_its_segments_for_the_next_start(
    tmp_path: Path,
) -> None:
    # A send that outlives shutdown's close (a collector answering late) asks the spool for
    # more: it must get nothing (not an error on a closed descriptor), and lose nothing.
    spool = Spool(tmp_path, 1 << 20)
    spool.open()
    spool.append([event(1)])
    spool.sync()
    assert spool.sendable
    spool.close()
    assert not spool.sendable
    assert spool.oldest() is None and spool.oldest_number() is None
    again = Spool(tmp_path, 1 << 20)
    again.open()
    assert drain(again) == [event(1)]


def test_full_spool_keeps_the_first_events_and_counts_the_rest(tmp_path: Path) -> None:
    one_line = len(event(1).to_json()) + 10
    spool = Spool(tmp_path, one_line * 3)
    spool.open()
    written = spool.append([event(i) for i in range(10)])
    # The pusher decides what becomes of the seven: sent live, or dropped if refused.
    assert (written.kept, written.full) == (3, True) and spool.stats.spooled == 3
    assert [e.time_ns for e in drain(spool)] == [event(i).time_ns for i in range(3)]


def test_corrupt_lines_and_files_are_skipped_and_counted(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.open()
    spool.append([event(1), event(2), event(3)])
    spool.close()
    (segment,) = tmp_path.glob("seg-*.jsonl")
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"XID 2", b"XID 9")  # checksum no longer matches
    segment.write_bytes(b"".join(lines) + b"garbage without a checksum\n")
    (tmp_path / "seg-000000000009.jsonl").write_bytes(b"\x00\xff" * 100)
    (tmp_path / "seg-000000000010.jsonl.tmp").write_bytes(b"half a write")
    again = Spool(tmp_path, 1 << 20)
    again.open()  # never raises
    assert drain(again) == [event(1), event(3)]
    assert again.stats.corrupt == 3
    assert list(tmp_path.glob("seg-*")) == []


def test_a_spool_in_use_by_another_agent_is_not_shared(tmp_path: Path) -> None:
    first = Spool(tmp_path, 1 << 20)
    first.open()
    second = Spool(tmp_path, 1 << 20)
    second.open()
    assert first.usable and not second.usable
    assert second.append([event(1)]).segment is None
    assert second.stats.errors == 1 and first.stats.records == 0


def test_an_unusable_directory_means_no_spool_not_no_agent(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    spool = Spool(blocker / "spool", 1 << 20)
    spool.open()
    assert not spool.usable
    assert spool.append([event(1)]).kept == 0
    assert spool.stats.errors == 1


def test_a_new_spool_is_private_to_the_agent(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "events", 1 << 20)
    spool.open()
    spool.append([event(1)])
    assert stat.S_IMODE((tmp_path / "events").stat().st_mode) == 0o700
    files = list((tmp_path / "events").iterdir())
    assert len(files) == 2  # the lock and one segment
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}


def test_a_spool_others_can_read_is_refused_with_the_fix_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.open()
    spool.append([event(1)])
    spool.close()
    (segment,) = tmp_path.glob("seg-*")
    os.chmod(tmp_path, 0o755)  # as agents before the write-ahead spool made it
    refused = Spool(tmp_path, 1 << 20)
    with caplog.at_level(logging.ERROR):
        refused.open()
    assert not refused.usable and refused.stats.errors == 1
    assert f"chmod 700 {tmp_path}" in caplog.text and "0755" in caplog.text
    assert segment.exists()  # nothing deleted: the events wait for the fix
    os.chmod(tmp_path, 0o700)
    fixed = Spool(tmp_path, 1 << 20)
    fixed.open()
    assert drain(fixed) == [event(1)]


def test_events_spooled_without_an_id_get_the_same_one_on_every_replay(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.open()
    spool.append([event(1)])
    spool.close()
    (segment,) = tmp_path.glob("seg-*")
    # A segment as agents before log.record.uid wrote it.
    old = event(1).to_json().replace(f',"u":"{event(1).uid}"', "").encode()
    segment.write_bytes(b"%08x %s\n" % (zlib.crc32(old), old))
    uids = []
    for _ in range(2):
        again = Spool(tmp_path, 1 << 20)
        again.open()
        oldest = again.oldest()
        assert oldest is not None
        uids.append(oldest[1][0].uid)
        again.close()
    assert uids[0] == uids[1] != event(1).uid and len(uids[0]) == 26


def test_a_full_disk_is_logged_once_counted_and_recovers(
    small_fs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(small_fs / "events", 1 << 30)  # the disk, not the limit, is what fills
    spool.open()
    ballast = fill(small_fs)
    with caplog.at_level(logging.ERROR):
        results = [spool.append([event(i)]) for i in range(3)]
    assert [w.segment for w in results] == [None] * 3
    assert spool.stats.errors == 3 and spool.stats.records == 0
    assert caplog.text.count("cannot write the event spool") == 1
    assert "disk is full" in caplog.text
    assert not list((small_fs / "events").glob("*.tmp"))  # no half-written leftovers
    ballast.unlink()
    assert spool.append([event(7)]).segment is not None
    assert drain(spool) == [event(7)]


def test_a_read_only_spool_is_logged_and_counted(
    small_fs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(small_fs / "events", 1 << 20)
    spool.open()
    spool.append([event(1)])
    spool.close()
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    again = Spool(small_fs / "events", 1 << 20)
    with caplog.at_level(logging.ERROR):
        again.open()
    assert not again.usable and again.stats.errors == 1
    assert "Read-only file system" in caplog.text


def test_a_spool_directory_removed_while_running_is_made_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    import shutil

    path = tmp_path / "events"
    spool = Spool(path, 1 << 20)
    spool.open()
    assert spool.append([event(1)]).kept == 1
    shutil.rmtree(path)  # an operator's rm -rf while the agent runs
    with caplog.at_level(logging.ERROR):
        written = spool.append([event(2)])
    assert written.kept == 1  # durable again, not only from the next restart
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert [p.name for p in path.glob("seg-*")] != []
    assert "was removed while the agent ran" in caplog.text
    assert drain(spool) == [event(2)]  # event 1 went with the directory
    spool.close()
    again = Spool(path, 1 << 20)  # the lock was taken in the new directory, and released
    again.open()
    assert again.usable
    again.close()
