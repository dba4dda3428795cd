"""The sampling task of one device: one loop per metric group, each on its own interval.

All device calls run on the device's own worker thread under a deadline. A call that overruns
marks the device unresponsive (its readings go absent) without delaying any other device; a
lost device is re-probed at a low rate and resumes when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, Device, DeviceLost, ProcessReader
from gpu_otel_agent.model.snapshot import (
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.runtime.config_holder import ConfigHolder
from gpu_otel_agent.sampling.worker import DeviceWorker
from gpu_otel_agent.workloads.attribution import Attribution

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class SamplerStats:
    """Per-device counters for self-telemetry and the benchmark suite."""

    cycles: int = 0
    missed_cycles: int = 0
    deadline_overruns: int = 0
    errors: int = 0
    read_seconds_total: float = 0.0  # time in successful group reads
    last_read_seconds: dict[str, float] = field(default_factory=dict)  # per group


class DeviceObserver(Protocol):
    """Told what the sampler sees happen to its device (the health engine implements it).

    Called on the event loop; must not block.
    """

    def unresponsive(self, uuid: str, call: str | None, seconds: float) -> None: ...

    def responsive(self, uuid: str) -> None: ...

    def lost(self, uuid: str, reason: str) -> None: ...

    def available(self, uuid: str) -> None: ...

    def sampled(self, uuid: str, group: str, readings: tuple[Reading, ...]) -> None: ...


class CallOverrun(Exception):
    def __init__(self, call: str | None, seconds: float) -> None:
        super().__init__(f"{call or 'device call'} did not return within {seconds:g}s")
        self.call = call


class DeviceSampler:
    def __init__(
        self,
        device: Device,
        store: SnapshotStore,
        config: ConfigHolder,
        clock_ns: Callable[[], int] = time.time_ns,
        attribution: Attribution | None = None,
        *,
        observer: DeviceObserver | None = None,
    ) -> None:
        self._device = device
        self._observer = observer
        self._store = store
        self._config = config
        self._clock_ns = clock_ns
        self._worker = DeviceWorker(f"gpu-{device.identity.index}")
        self._available = asyncio.Event()
        self._reprobe_now = asyncio.Event()
        self._groups: frozenset[str] = frozenset()
        self._snapshot = DeviceSnapshot(device.identity, HealthState.OK, clock_ns())
        self.stats = SamplerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._hung = False  # a call overran its deadline and has not returned yet
        self._attribution = attribution if isinstance(device, ProcessReader) else None
        if self._attribution is not None:
            self._attribution.watch_device(device.identity.uuid, self._republish_processes)

    @property
    def busy(self) -> bool:
        return self._worker.busy

    @property
    def snapshot(self) -> DeviceSnapshot:
        return self._snapshot

    async def run(self) -> None:
        await self._probe_until_available()
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks  # the re-probe of a lost device runs here too, and dies with it
            for group in sorted(self._groups):
                tasks.create_task(self._group_loop(group), name=f"{self._name}:{group}")

    def close(self) -> None:
        self._worker.stop()

    def reprobe_now(self) -> None:
        """The vendor said the device is back (an AMD post-reset notification): don't wait out
        ``lost_reprobe_interval`` to find out. On the event loop."""
        self._reprobe_now.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep between re-probes of a lost device, cut short by :meth:`reprobe_now`."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._reprobe_now.wait()
        self._reprobe_now.clear()

    @property
    def _uuid(self) -> str:
        return self._device.identity.uuid

    @property
    def _name(self) -> str:
        return f"gpu {self._device.identity.index} ({self._device.identity.uuid})"

    def _publish(self, snapshot: DeviceSnapshot) -> None:
        self._snapshot = snapshot
        self._store.put(snapshot)

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the device thread; raise CallOverrun past the deadline."""
        timeout = self._config.current.call_timeout
        future: Future[T] = self._worker.submit(fn)
        call = self._device.current_call
        try:
            # asyncio.timeout, not wait_for: wait_for (3.11) can swallow a shutdown's cancel.
            async with asyncio.timeout(timeout):
                return await asyncio.wrap_future(future)
        except TimeoutError:
            call = self._device.current_call or call
            self.stats.deadline_overruns += 1
            self._hung = True
            future.add_done_callback(self._on_call_done)  # tells us when it finally returns
            if self._observer is not None:
                self._observer.unresponsive(self._uuid, call, timeout)
            self._set_health(HealthState.DEGRADED, f"unresponsive: {call} exceeded {timeout:g}s")
            raise CallOverrun(call, timeout) from None

    def _on_call_done(self, future: Future[Any]) -> None:
        # Runs on the worker thread once the hung call returns; hop back to the loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._after_hang, future)

    def _after_hang(self, future: Future[Any]) -> None:
        if not self._hung or future.cancelled():
            return  # a cancelled job never ran: the hung one is still in its call
        self._hung = False
        error = future.exception()
        if isinstance(error, DeviceLost):
            self._lost(str(error))
            return
        if self._observer is not None:
            self._observer.responsive(self._uuid)
        if self._snapshot.health is HealthState.DEGRADED:
            self._set_health(HealthState.OK, "")

    def _set_health(self, health: HealthState, reason: str) -> None:
        if health is self._snapshot.health and reason == self._snapshot.reason:
            return
        if health is HealthState.OK:
            log.info("%s: %s", self._name, "responding again" if self._snapshot.reason
                     else "ok")
        else:
            log.warning("%s: %s", self._name, reason)
        self._publish(self._snapshot.with_health(health, reason))

    def _mark_lost(self, reason: str) -> None:
        self._available.clear()
        if self._observer is not None:
            self._observer.lost(self._uuid, reason)
        self._set_health(HealthState.FAILED, f"lost: {reason}")

    def _lost(self, reason: str) -> None:
        """The device vanished while sampling: stop its groups and re-probe at a low rate."""
        if not self._available.is_set() or self._tasks is None:
            return  # already being re-probed
        self._mark_lost(reason)
        self._tasks.create_task(self._reprobe(), name=f"{self._name}:reprobe")

    async def _probe_until_available(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            try:
                groups = await self._call(self._device.probe)
                self._groups = (groups if self._attribution is not None
                                else groups - {PROCESS_GROUP})
            except (DeviceLost, CallOverrun) as exc:
                if isinstance(exc, DeviceLost):
                    self._mark_lost(str(exc))
                await self._pause(self._config.current.lost_reprobe_interval)
                continue
            log.info("%s: serving groups %s", self._name, ", ".join(sorted(self._groups)))
            if self._observer is not None:
                self._observer.available(self._uuid)
            self._set_health(HealthState.OK, "")
            self._available.set()
            return

    async def _reprobe(self) -> None:
        await self._pause(self._config.current.lost_reprobe_interval)
        await self._probe_until_available()

    async def _group_loop(self, group: str) -> None:
        loop = asyncio.get_running_loop()
        next_due = loop.time()
        while True:
            settings = self._config.current.groups.get(group)
            if settings is None or not settings.enabled:
                if group in self._snapshot.samples:
                    self._publish(self._snapshot.without_group(group))
                await self._config.sleep(3600.0)
                next_due = loop.time()
                continue
            if not self._available.is_set():
                await self._available.wait()
                next_due = loop.time()
            delay = next_due - loop.time()
            if delay > 0 and await self._config.sleep(delay):
                next_due = loop.time()  # reconfigured: start the new cadence now
                continue
            next_due += settings.interval
            now = loop.time()
            if next_due < now:  # fell behind (a slow call): skip, don't burst to catch up
                self.stats.missed_cycles += int((now - next_due) // settings.interval) + 1
                next_due = now + settings.interval
            if self._hung:
                # Queueing behind a hung call would only pile up stale work.
                self.stats.missed_cycles += 1
                continue
            await self._sample(group)

    def _memory_total(self) -> int | None:
        fast = self._snapshot.samples.get("fast")
        for reading in fast.readings if fast else ():
            if reading.metric == "hw.gpu.memory.limit":
                return int(reading.value)
        return None

    def _republish_processes(self) -> None:
        """Attribution changed (a process exited, names arrived): rebuild from the last list."""
        if (self._attribution is None or PROCESS_GROUP not in self._snapshot.samples
                or self._snapshot.health is not HealthState.OK):
            return
        readings = self._attribution.readings(self._device.identity, None, self._memory_total())
        self._publish(self._snapshot.with_sample(
            GroupSample(PROCESS_GROUP, readings, self._clock_ns())))

    async def _read(self, group: str) -> tuple[Reading, ...]:
        if group != PROCESS_GROUP:
            return await self._call(lambda: self._device.read(group))
        assert self._attribution is not None and isinstance(self._device, ProcessReader)
        processes = await self._call(self._device.read_processes)
        return self._attribution.readings(self._device.identity, processes,
                                          self._memory_total())

    async def _sample(self, group: str) -> None:
        started = time.perf_counter()
        try:
            readings: tuple[Reading, ...] = await self._read(group)
        except CallOverrun:
            return
        except DeviceLost as exc:
            self._lost(str(exc))
            return
        except Exception:
            self.stats.errors += 1
            log.exception("%s: reading group %s failed", self._name, group)
            return
        self.stats.cycles += 1
        elapsed = time.perf_counter() - started
        self.stats.read_seconds_total += elapsed
        self.stats.last_read_seconds[group] = elapsed
        if self._observer is not None:
            self._observer.sampled(self._uuid, group, readings)
        if self._snapshot.health is not HealthState.OK:
            return  # a late answer from a device already marked down must not revive it
        self._publish(self._snapshot.with_sample(GroupSample(group, readings, self._clock_ns())))
