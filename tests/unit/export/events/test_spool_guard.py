"""The spool's guard: ``gpu-agent check`` passes exactly when ``run`` would use the spool (one
validation, shared), the owner is checked and not only the mode, damaged records are logged
and handled (never the end of the sender)."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpu_otel_agent.check.host import spool as check_spool
from gpu_otel_agent.check.result import Status
from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.export.otlp.retry import Attempt
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from tests.unit.export.events.collectors import Accepting

NOBODY = 65534


def check(path: Path) -> Status:
    config = load(None, environ={"GPU_AGENT_EVENT_SPOOL": str(path)})
    (result,) = check_spool(config)
    return result.status


def usable(path: Path) -> bool:
    spool = Spool(path, 1 << 20)
    spool.open()
    try:
        return spool.usable
    finally:
        spool.close()


def test_check_creates_the_spool_private_so_run_uses_it(tmp_path: Path) -> None:
    path = tmp_path / "var" / "events"
    old = os.umask(0o022)  # a node's usual umask: mkdir's default would be 0755
    try:
        assert check(path) is Status.PASS
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert usable(path)
    assert check(path) is Status.PASS


def test_check_fails_where_run_would_refuse_the_spool(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.mkdir(mode=0o700)
    path.chmod(0o755)  # as a previous `check` or a hand-made directory left it
    assert not usable(path)
    assert check(path) is Status.FAIL
    path.chmod(0o700)
    assert usable(path) and check(path) is Status.PASS


def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")


def test_a_spool_owned_by_another_user_is_refused_by_run_and_check(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    _as_root()
    path = tmp_path / "events"
    path.mkdir(mode=0o700)
    os.chown(path, NOBODY, NOBODY)  # mode 0700, but that user's: they could forge events
    with caplog.at_level(logging.ERROR):
        assert not usable(path)
    assert f"uid {NOBODY}" in caplog.text
    assert check(path) is Status.FAIL


def event(i: int) -> HealthEvent:
    return HealthEvent("gpu.xid", 1_700_000_000_000_000_000 + i, Severity.ERROR, f"XID {i}",
                       (("gpu.xid.code", i),))


def test_a_segment_owned_by_another_user_is_not_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    _as_root()
    first, second = event(1), event(2)
    spool = Spool(tmp_path, 1 << 20)
    spool.open()
    spool.append([first])
    spool.append([second])
    spool.close()
    forged = sorted(tmp_path.glob("seg-*"))[1]
    os.chown(forged, NOBODY, NOBODY)
    again = Spool(tmp_path, 1 << 20)
    with caplog.at_level(logging.ERROR):
        again.open()
    assert "belongs to another user" in caplog.text
    assert again.stats.records == 1
    again.sync()
    oldest = again.oldest()
    assert oldest is not None and oldest[1] == [first]
    again.close()


def _line(payload: bytes) -> bytes:
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


@pytest.mark.parametrize("bad_time", [b"1e400", b"Infinity", b"NaN", b"-1", b"1e30",
                                      b'"soon"', b"true"])
def test_a_record_with_a_valid_crc_and_a_bad_time_is_skipped_logged_and_the_rest_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad_time: bytes,
) -> None:
    """Such a line raised OverflowError (not a ValueError) and ended the sender thread on
    every start: no event was sent again (issue 30)."""
    good = event(7)
    bad = (b'{"n":"gpu.xid","t":%s,"s":"ERROR","b":"x","a":[],"u":"01J00000000000000000000000"}'
           % bad_time)
    segment = tmp_path / "seg-000000000000.jsonl"
    tmp_path.chmod(0o700)
    segment.write_bytes(_line(bad) + _line(good.to_json().encode()))
    segment.chmod(0o600)
    collector = Accepting()

    async def main() -> None:
        pusher = EventPusher(collector, Spool(tmp_path, 1 << 20), retry=0.01)
        task = asyncio.create_task(pusher.run())
        try:
            deadline = time.monotonic() + 30
            while good.time_ns not in collector.accepted:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            pusher.submit(event(8))  # the sender still works after it
            while event(8).time_ns not in collector.accepted:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
        finally:
            task.cancel()
            pusher.close([], timeout=1.0)

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert "corrupt record (segment 0, line 1)" in caplog.text  # logged, not only counted
    assert not list(tmp_path.glob("seg-*"))


def test_a_send_failing_during_shutdown_says_the_events_wait_in_the_spool(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """The send in flight fails once shutdown has closed the spool: the events are on disk
    for the next start, and the log said "keeping them in memory"."""
    sending = threading.Event()
    release = threading.Event()

    class Stuck:
        def send(self, events: Sequence[HealthEvent]) -> Attempt:
            sending.set()
            release.wait(30)
            return Attempt(ok=False, retryable=True)

        def shutdown(self) -> None:
            release.set()

    pusher = EventPusher(Stuck(), Spool(tmp_path / "spool", 1 << 20), retry=0.01)

    async def main() -> None:
        task = asyncio.create_task(pusher.run())
        pusher.submit(event(1))
        await asyncio.to_thread(sending.wait, 30)
        task.cancel()
        pusher.close([], timeout=0.5)

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
        for thread in threading.enumerate():  # the send in flight ends after close()
            if thread.name == "otlp-events":
                thread.join(30)
    assert "wait in the spool" in caplog.text
    assert "in memory" not in caplog.text
    assert list((tmp_path / "spool").glob("seg-*"))  # and there they are
