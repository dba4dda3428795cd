"""The storm journal: counts survive a crash, closed windows are not summarised twice, the file
stays bounded, and a line cut by the crash costs nothing before it."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_otel_agent.gpu_health.storm import StormKey
from gpu_otel_agent.gpu_health.storm_journal import NAME, OpenWindow, StormJournal

KEY = StormKey("GPU-a", "gpu.xid", code=13)
MIG = StormKey("GPU-a", "gpu.xid", code=43, scope="MIG-5b3a1f0e-0000-4000-8000-000000000001")


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
    journal.count(StormKey("GPU-b", "gpu.xid", code=31), 2_000, 1)
    uid = journal.summarised(KEY, 1_000)
    journal.written(["someone-else", uid])
    other = StormKey("GPU-b", "gpu.xid", code=31)
    assert StormJournal(tmp_path).open() == [OpenWindow(other, 2_000, 1)]


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


def test_a_storm_on_a_mig_instance_keeps_its_gpu_and_its_instance(tmp_path: Path) -> None:
    """The typed key comes back whole: the physical GPU the summary is found by, and the
    instance it is about (the key once carried the instance's UUID where the GPU's belongs)."""
    journal = StormJournal(tmp_path)
    journal.open()
    journal.count(MIG, 1_000, 7)
    journal.count(KEY, 1_000, 2)  # the same code on the GPU itself: a window of its own
    restored = {w.key: w.count for w in StormJournal(tmp_path).open()}
    assert restored == {MIG: 7, KEY: 2}
    assert next(iter(k for k in restored if k.scope)).gpu == "GPU-a"


def test_a_journal_written_before_the_typed_key_is_read(tmp_path: Path) -> None:
    (tmp_path / NAME).write_text(json.dumps({"k": ["GPU-a", "gpu.xid", 13], "w": 1_000,
                                             "c": 3}) + "\n" +
                                 json.dumps({"k": ["GPU-a", "gpu.ecc", "corrected"],
                                             "w": 2_000, "c": 2}) + "\n" +
                                 json.dumps({"k": {"gpu": 7}, "w": 1, "c": 1}) + "\n")
    assert sorted(StormJournal(tmp_path).open(), key=lambda w: w.window) == [
        OpenWindow(KEY, 1_000, 3),
        OpenWindow(StormKey("GPU-a", "gpu.ecc", qualifier="corrected"), 2_000, 2)]


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
    journal.count(StormKey("GPU-gone", "gpu.xid", code=13), 1_000, 5)

    async def main() -> None:
        engine = HealthEngine([], lambda event: None, SnapshotStore(), EngineSettings())
        again = StormJournal(tmp_path)
        engine.journal = again
        engine.restore(again.open())

    asyncio.run(main())
    assert StormJournal(tmp_path).open() == []


def test_an_engine_built_with_a_journal_counts_in_it_only_once_it_is_open(
        tmp_path: Path) -> None:
    """Wired at construction; the pipeline opens it once the spool is (where it is usable)."""
    import asyncio

    from gpu_otel_agent.backends.protocol import EVENT_XID, DeviceEvent
    from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
    from gpu_otel_agent.model.snapshot import DeviceIdentity, SnapshotStore

    journal = StormJournal(tmp_path)
    gpu = DeviceIdentity("GPU-a", 0, "nvidia", "NVIDIA A100-SXM4-80GB", "00000000:18:00.0")

    async def main() -> None:
        engine = HealthEngine([gpu], lambda event: None, SnapshotStore(), EngineSettings(),
                              journal=journal)
        burst = [DeviceEvent("GPU-a", EVENT_XID, 0, code=13) for _ in range(4)]
        engine.on_events(burst)  # not open: the repeats are counted in memory only
        assert not journal.opened and not (tmp_path / NAME).exists()
        engine.restore(journal.open())
        engine.on_events(burst)
        engine.close()

    asyncio.run(main())
    [window] = StormJournal(tmp_path).open()
    assert (window.key.gpu, window.key.code, window.count) == ("GPU-a", 13, 7)
