"""The storm journal: counts survive a crash, closed windows are not summarised twice, the file
stays bounded, and a line cut by the crash costs nothing before it."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.gpu_health.storm_journal import NAME, OpenWindow, StormJournal

KEY = ("GPU-a", "gpu.xid", 13)


def test_counts_of_an_open_window_come_back_after_a_crash(tmp_path: Path) -> None:
    journal = StormJournal(tmp_path)
    assert journal.open() == []
    for count in range(1, 10):
        journal.count(KEY, 1_000, count)
    # kill -9: no close, nothing else written
    again = StormJournal(tmp_path)
    assert again.open() == [OpenWindow(KEY, 1_000, 9)]


def test_a_window_whose_summary_was_written_ahead_is_closed(tmp_path: Path) -> None:
    journal = StormJournal(tmp_path)
    journal.open()
    journal.count(KEY, 1_000, 3)
    journal.count(("GPU-b", "gpu.xid", 31), 2_000, 1)
    uid = journal.summarised(KEY, 1_000)
    journal.written(["someone-else", uid])
    assert StormJournal(tmp_path).open() == [OpenWindow(("GPU-b", "gpu.xid", 31), 2_000, 1)]


def test_the_summary_uid_is_the_same_on_every_start(tmp_path: Path) -> None:
    assert StormJournal(tmp_path).summarised(KEY, 1_000) == \
        StormJournal(tmp_path).summarised(KEY, 1_000)
    assert StormJournal(tmp_path).summarised(KEY, 1_000) != \
        StormJournal(tmp_path).summarised(KEY, 2_000)


def test_the_file_is_rewritten_with_the_open_windows_when_it_grows(tmp_path: Path) -> None:
    journal = StormJournal(tmp_path, max_bytes=2_000)
    journal.open()
    for count in range(1, 500):
        journal.count(KEY, 1_000, count)
    assert (tmp_path / NAME).stat().st_size <= 2_000
    assert StormJournal(tmp_path).open() == [OpenWindow(KEY, 1_000, 499)]


def test_a_line_cut_by_the_crash_is_skipped(tmp_path: Path) -> None:
    journal = StormJournal(tmp_path)
    journal.open()
    journal.count(KEY, 1_000, 4)
    with (tmp_path / NAME).open("ab") as file:
        file.write(b'{"k":["GPU-a","gpu.x')
    assert StormJournal(tmp_path).open() == [OpenWindow(KEY, 1_000, 4)]


def test_without_a_spool_nothing_is_kept() -> None:
    journal = StormJournal(None)
    assert journal.open() == []
    journal.count(KEY, 1_000, 1)  # no error, nothing written


def test_a_window_of_a_gpu_the_node_no_longer_has_is_closed_not_kept(tmp_path: Path) -> None:
    import asyncio

    from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
    from gpu_otel_agent.model.snapshot import SnapshotStore

    journal = StormJournal(tmp_path)
    journal.open()
    journal.count(("GPU-gone", "gpu.xid", 13), 1_000, 5)

    async def main() -> None:
        engine = HealthEngine([], lambda event: None, SnapshotStore(), EngineSettings())
        again = StormJournal(tmp_path)
        engine.journal = again
        engine.restore(again.open())

    asyncio.run(main())
    assert StormJournal(tmp_path).open() == []
