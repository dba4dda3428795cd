"""An export due on the tick the devices' reads are due on waits for those reads to be
published (``ReadRounds``, the node's ``threads.relay.Relay``): it carries that tick's
readings, not the tick's before, and a device hung in its read holds it back no longer than
the relay's pass-on deadline. Real relay, real device thread; the read is a job held on an
event, so the order is the test's to decide."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator

from gpu_otel_agent.config.holder import ConfigHolder, grid_after
from gpu_otel_agent.config.load import Overrides, load
from gpu_otel_agent.export.metrics.pusher import MetricPusher
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    HealthState,
    NodeSnapshot,
    SnapshotStore,
)
from gpu_otel_agent.threads.device_worker import DeviceWorker
from gpu_otel_agent.threads.relay import Relay
from tests.polling import until

INTERVAL_S = 0.2
IDENTITY = DeviceIdentity("GPU-0", 0, "nvidia", "GPU", "bus")


class _Exporter:
    """Records what each export carried: the device's ``start_time_ns``, our marker of
    which read published the device."""

    def __init__(self) -> None:
        self.carried: list[int] = []

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        self.carried.append(snapshot.devices[0].start_time_ns)
        return True

    def shutdown(self, timeout_s: float) -> None:
        pass


class _Device:
    """A device's group loop in miniature: on each grid tick it submits a read to its
    thread through the relay and publishes the read's answer (read number n publishes
    marker n). The read waits until the test lets it go."""

    def __init__(self, store: SnapshotStore, holder: ConfigHolder, relay: Relay) -> None:
        self.store, self.holder = store, holder
        self.worker = DeviceWorker("gpu-rounds-test", relay)
        self.go = threading.Event()  # the read answers once set
        self.submitted = 0  # reads submitted (n: the read that will publish marker n)
        self.published = 0

    def _read(self, marker: int) -> int:
        """On the device thread: answers ``marker`` once the test lets it (0 if never)."""
        return marker if self.go.wait(60) else 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.holder.sleep_until(loop, grid_after(loop.time(), INTERVAL_S))
            self.submitted += 1
            job = self.worker.run_on_loop(functools.partial(self._read, self.submitted), loop)
            answered = await job.waiter
            self.store.put(DeviceSnapshot(IDENTITY, HealthState.OK, answered))
            self.published = answered


@contextlib.asynccontextmanager
async def _running(pass_on_after_s: float) -> AsyncIterator[tuple[_Device, _Exporter]]:
    """A device whose first read is held, then the pusher started beside it; both stopped
    on the way out."""
    store = SnapshotStore()
    store.put(DeviceSnapshot(IDENTITY, HealthState.OK, 0))  # marker 0: before any read
    holder = ConfigHolder(load(None, Overrides(export_interval=INTERVAL_S), environ={}))
    relay = Relay(pass_on_after_s)
    device = _Device(store, holder, relay)
    exporter = _Exporter()
    pusher = MetricPusher(exporter, store, holder, device_count=1, rounds=relay)
    device_task = asyncio.create_task(device.run())
    await until(lambda: device.submitted == 1, what="the first read submitted (and held)")
    export_task = asyncio.create_task(pusher.run())
    try:
        yield device, exporter
    finally:
        for task in (device_task, export_task):
            task.cancel()
        device.go.set()
        device.worker.stop()
        await pusher.close(5.0)


def test_an_export_due_with_a_read_waits_for_it_and_carries_what_it_published() -> None:
    async def main() -> None:
        # Never released by the relay: the reads are held on purpose.
        async with _running(pass_on_after_s=60.0) as (device, exporter):
            # The first export (every device read once, or an interval) goes with marker 0.
            await until(lambda: len(exporter.carried) == 1, what="the first export")
            assert exporter.carried == [0]
            device.go.set()  # from now on every read answers at once
            await until(lambda: len(exporter.carried) >= 4, what="exports on the grid")
            assert exporter.carried == sorted(exporter.carried)
            device.go.clear()  # the next read is held: the export due with it must wait
            held = device.submitted + 1
            await until(lambda: device.submitted == held, what="a read held on its tick")
            await asyncio.sleep(4 * INTERVAL_S)  # ticks pass: an export not waiting would go
            device.go.set()
            await until(lambda: held in exporter.carried, what="the export after the read")
            # The read before the hold went out on its own tick (and perhaps once more, an
            # export running late catching up); an export not waiting for the held read
            # would have sent it again on each of the four ticks the hold lasted.
            assert exporter.carried.count(held - 1) <= 2, exporter.carried
            assert device.published >= held

    asyncio.run(main())


def test_a_device_hung_in_its_read_holds_the_export_back_only_until_the_pass_on() -> None:
    async def main() -> None:
        async with _running(pass_on_after_s=INTERVAL_S) as (device, exporter):
            # Exports keep going, with what was published before the hang, while it hangs.
            await until(lambda: len(exporter.carried) >= 3, what="exports past a hung read")
            assert device.published == 0 and set(exporter.carried) == {0}
            device.go.set()
            await until(lambda: device.published >= 1, what="the hung read answered at last")
            await until(lambda: exporter.carried[-1] >= 1, what="an export with its answer")

    asyncio.run(main())
