"""The event pusher: every event is written ahead before it is sent; refused events wait (on
disk, or in memory without a spool) and go out in order once the collector takes them again."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.export.otlp.retry import Attempt
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from tests.unit.export.events.disk import fill


class Collector:
    """Refuses everything while ``down``; records what it accepted."""

    def __init__(self) -> None:
        self.down = True
        self.accepted: list[str] = []

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        if self.down:
            return Attempt(ok=False, retryable=True)
        self.accepted.extend(e.body for e in events)
        return Attempt(ok=True)

    def shutdown(self) -> None:
        return None


def event(i: int) -> HealthEvent:
    return HealthEvent("gpu.xid", i, Severity.ERROR, f"e{i}", (("gpu.xid.code", i),))


Scenario = Callable[[EventPusher], Awaitable[None]]


def drive(collector: Collector, spool: Spool, scenario: Scenario) -> None:
    """Run a pusher (retrying every 10 ms) through ``scenario``, then shut it down."""

    async def main() -> None:
        pusher = EventPusher(collector, spool, retry=0.01)
        task = asyncio.create_task(pusher.run())
        try:
            await scenario(pusher)
        finally:
            task.cancel()
            pusher.close([], timeout=1.0)

    asyncio.run(main())


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("on_disk", [True, False], ids=["spool", "memory-only"])
def test_refused_events_all_arrive_in_order_when_the_collector_returns(
    tmp_path: Path, on_disk: bool
) -> None:
    collector = Collector()
    spool = Spool(tmp_path / "spool" if on_disk else None, 1 << 20)

    async def main() -> None:
        pusher = EventPusher(collector, spool, retry=0.01)
        task = asyncio.create_task(pusher.run())
        for i in range(5):
            pusher.submit(event(i))
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        assert collector.accepted == []
        assert spool.stats.records == (5 if on_disk else 0)
        collector.down = False
        deadline = time.monotonic() + 5
        while len(collector.accepted) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        pusher.close([], timeout=1.0)

    asyncio.run(main())
    assert collector.accepted == [f"e{i}" for i in range(5)]
    assert spool.stats.dropped == 0


def test_shutdown_during_an_outage_keeps_everything_on_disk(tmp_path: Path) -> None:
    collector = Collector()
    spool = Spool(tmp_path, 1 << 20)

    async def main() -> None:
        pusher = EventPusher(collector, spool, retry=10.0)
        task = asyncio.create_task(pusher.run())
        pusher.submit(event(1))
        await asyncio.sleep(0.1)  # refused: the pusher now waits 10 s before retrying
        pusher.submit(event(2))
        task.cancel()
        pusher.close([event(3)], timeout=0.5)

    asyncio.run(main())
    again = Spool(tmp_path, 1 << 20)
    again.open()
    kept = []
    while (oldest := again.oldest()) is not None:
        kept.extend(e.body for e in oldest[1])
        again.remove(oldest[0])
    assert kept == ["e1", "e2", "e3"]


class SizeLimitedCollector(Collector):
    """Accepts requests of at most ``limit`` events (gRPC caps a request's size), and only the
    first ``budget`` requests; records the size of every request it was offered."""

    def __init__(self, limit: int, budget: int) -> None:
        super().__init__()
        self.down = False
        self.limit = limit
        self.budget = budget
        self.requests: list[int] = []

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        self.requests.append(len(events))
        if len(events) > self.limit or len(self.requests) > self.budget:
            return Attempt(ok=False, retryable=True)
        return super().send(events)


def test_shutdown_sends_pending_events_in_bounded_requests_and_spools_the_rest(
    tmp_path: Path,
) -> None:
    from gpu_otel_agent.export.events.pusher import MAX_BATCH

    collector = SizeLimitedCollector(limit=MAX_BATCH, budget=2)
    spool = Spool(tmp_path, 64 << 20)
    total = 3 * MAX_BATCH + 7
    spool.open()
    pusher = EventPusher(collector, spool)
    pusher.close([event(i) for i in range(total)], timeout=5.0)

    assert max(collector.requests) <= MAX_BATCH
    assert collector.accepted == [f"e{i}" for i in range(2 * MAX_BATCH)]
    again = Spool(tmp_path, 64 << 20)
    again.open()
    kept = []
    while (oldest := again.oldest()) is not None:
        kept.extend(e.body for e in oldest[1])
        again.remove(oldest[0])
    assert kept == [f"e{i}" for i in range(2 * MAX_BATCH, total)]


class DiskCheckingCollector(Collector):
    """Before accepting, reads the spool directory itself: each event offered must already be
    on disk (write-ahead), under the id it is sent with."""

    def __init__(self, spool_dir: Path) -> None:
        super().__init__()
        self.down = False
        self.spool_dir = spool_dir
        self.on_disk_when_sent: list[bool] = []

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        disk = b"".join(p.read_bytes() for p in self.spool_dir.glob("seg-*.jsonl"))
        self.on_disk_when_sent.extend(f'"u":"{e.uid}"'.encode() in disk for e in events)
        return super().send(events)


def test_every_event_is_on_disk_before_its_first_send_and_gone_once_accepted(
    tmp_path: Path,
) -> None:
    collector = DiskCheckingCollector(tmp_path)
    spool = Spool(tmp_path, 1 << 20)

    async def scenario(pusher: EventPusher) -> None:
        await asyncio.sleep(0.05)
        for i in range(20):
            pusher.submit(event(i))
            if i % 3 == 0:
                await asyncio.sleep(0.005)
        await until(lambda: len(collector.accepted) == 20)

    drive(collector, spool, scenario)
    assert collector.accepted == [f"e{i}" for i in range(20)]
    assert collector.on_disk_when_sent == [True] * 20
    assert spool.stats.spooled == 20 and list(tmp_path.glob("seg-*")) == []
    assert spool.stats.resent == 0  # none needed a second send


def _live(count: int) -> Callable[[Collector], Scenario]:
    """Submit ``count`` events and wait until the collector has them all."""

    def make(collector: Collector) -> Scenario:
        async def scenario(pusher: EventPusher) -> None:
            await asyncio.sleep(0.05)
            for i in range(count):
                pusher.submit(event(i))
            await until(lambda: len(collector.accepted) == count)
        return scenario
    return make


def test_events_the_spool_cannot_take_still_go_out_live(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    collector = Collector()
    collector.down = False
    spool = Spool(blocker / "spool", 1 << 20)
    drive(collector, spool, _live(3)(collector))
    assert collector.accepted == ["e0", "e1", "e2"]
    assert not spool.usable and spool.stats.errors == 1 and spool.stats.dropped == 0


def test_on_a_full_disk_events_still_go_out_live_and_the_failure_is_counted(
    small_fs: Path,
) -> None:
    collector = Collector()
    collector.down = False
    spool = Spool(small_fs / "events", 1 << 30)
    spool.open()
    ballast = fill(small_fs)  # the directory and its lock exist; no segment fits any more
    spool.close()
    drive(collector, spool, _live(5)(collector))
    ballast.unlink()
    assert collector.accepted == [f"e{i}" for i in range(5)]
    assert spool.stats.errors >= 1 and spool.stats.dropped == 0


def test_a_full_spool_sends_live_when_it_can_and_drops_only_when_refused(
    tmp_path: Path,
) -> None:
    collector = Collector()
    collector.down = False
    one_line = len(event(1).to_json()) + 10
    spool = Spool(tmp_path, one_line * 2)

    async def scenario(pusher: EventPusher) -> None:
        await asyncio.sleep(0.05)
        for i in range(4):  # one batch: two fit on disk, all four go out
            pusher.submit(event(i))
        await until(lambda: len(collector.accepted) == 4)
        collector.down = True
        pusher.submit(event(4))
        await until(lambda: pusher.stats.send_failures > 0)
        for i in range(5, 8):  # refused, and only one more fits: two are dropped
            pusher.submit(event(i))
        await until(lambda: spool.stats.dropped == 2)
        collector.down = False
        await until(lambda: len(collector.accepted) == 6)

    drive(collector, spool, scenario)
    assert collector.accepted == [f"e{i}" for i in range(6)]
    assert spool.stats.dropped == 2 and spool.stats.spooled == 4


class HangingCollector(Collector):
    """Its first send hangs until released (a collector that accepted the connection and
    never answers); everything is accepted once it is released."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.release = threading.Event()
        self.entered = threading.Event()

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        self.entered.set()
        self.release.wait(10)
        return super().send(events)


def test_a_send_that_hangs_does_not_hold_back_the_write_ahead(tmp_path: Path) -> None:
    collector = HangingCollector()
    spool = Spool(tmp_path, 1 << 20)

    def on_disk() -> int:
        return sum(p.read_bytes().count(b"\n") for p in tmp_path.glob("seg-*.jsonl"))

    async def scenario(pusher: EventPusher) -> None:
        pusher.submit(event(0))
        assert await asyncio.to_thread(collector.entered.wait, 10)
        for i in range(1, 4):  # the sender is stuck in the first send
            pusher.submit(event(i))
        await until(lambda: on_disk() == 4)
        assert on_disk() == 4 and collector.accepted == []
        collector.release.set()
        await until(lambda: len(collector.accepted) == 4)

    drive(collector, spool, scenario)
    assert collector.accepted == ["e0", "e1", "e2", "e3"]
    assert list(tmp_path.glob("seg-*")) == []


def test_a_burst_shares_fsyncs_instead_of_one_per_event(tmp_path: Path) -> None:
    collector = Collector()
    collector.down = False
    spool = Spool(tmp_path, 64 << 20)
    burst = 2000

    async def scenario(pusher: EventPusher) -> None:
        await asyncio.sleep(0.05)
        for i in range(burst):  # faster than any disk: the writer takes what has arrived
            pusher.submit(event(i))
        await until(lambda: len(collector.accepted) == burst)

    drive(collector, spool, scenario)
    assert collector.accepted == [f"e{i}" for i in range(burst)]
    assert spool.stats.spooled == burst
    # Group commit: each write takes what arrived during the one before (up to MAX_BATCH):
    # tens of fsyncs for the burst (about 25 here), not one per event.
    assert spool.stats.writes <= burst // 20
