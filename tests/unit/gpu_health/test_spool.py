"""The on-disk event spool: bounded, ordered, survives restarts and damage."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity


def event(i: int) -> HealthEvent:
    return HealthEvent("gpu.xid", 1_700_000_000_000_000_000 + i, Severity.ERROR, f"XID {i}",
                       (("hw.id", "GPU-1"), ("gpu.xid.code", i), ("gpu.call.duration", 0.5),
                        ("process.pid", (1, 2)), ("process.executable.name", ("a", "b"))))


def drain(spool: Spool) -> list[HealthEvent]:
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


def test_full_spool_keeps_the_first_events_and_counts_the_rest(tmp_path: Path) -> None:
    one_line = len(event(1).to_json()) + 10
    spool = Spool(tmp_path, one_line * 3)
    spool.open()
    spool.append([event(i) for i in range(10)])
    assert spool.stats.spooled == 3 and spool.stats.dropped == 7
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
    second.append([event(1)])
    assert second.stats.dropped == 1 and first.stats.records == 0


def test_an_unusable_directory_means_no_spool_not_no_agent(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    spool = Spool(blocker / "spool", 1 << 20)
    spool.open()
    assert not spool.usable
    spool.append([event(1)])
    assert spool.stats.dropped == 1
