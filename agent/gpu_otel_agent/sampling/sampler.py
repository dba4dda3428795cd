"""The sampling task of one device: one loop per metric group, each on its own interval.

All device calls run on the device's own worker thread under a deadline. A call that overruns
marks the device unresponsive (its readings go absent) without delaying any other device; a
lost device is re-probed at a low rate and resumes when it answers again.

Where what it learns goes (each one way, nothing calls back): readings into the snapshot store;
whether each device answers to the health board (``HealthReport``), which decides the device's
health; what it sees happen to the device to the health engine (``DeviceObserver``: events);
process lists to attribution, which publishes the attributed processes itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from gpu_otel_agent.backends.protocol import (
    PROCESS_GROUP,
    Device,
    DeviceLost,
    DeviceNeedsReset,
    Partitioned,
    ProcessReader,
    ReadSkipped,
)
from gpu_otel_agent.config.holder import ConfigHolder, grid_after
from gpu_otel_agent.model.counters import CounterRestarts
from gpu_otel_agent.model.snapshot import (
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.sampling.partitions import (
    Enumerated,
    PartitionState,
    TreeRead,
    enumerate_partitions,
    read_own,
    read_tree,
)
from gpu_otel_agent.threads.costs import ATTRIBUTION, SNAPSHOT, Stage
from gpu_otel_agent.threads.deadlines import Deadlines
from gpu_otel_agent.threads.device_worker import DeviceWorker
from gpu_otel_agent.threads.handoff import LoopJob
from gpu_otel_agent.threads.relay import Relay
from gpu_otel_agent.workloads.attribution import Attribution

log = logging.getLogger(__name__)
T = TypeVar("T")
# Partitions are re-enumerated on the slow group's cadence (reconfiguration is rare, and a
# destroyed partition's failed read triggers a scan at once), or this often without it.
PARTITION_SCAN_SECONDS = 30.0
# The calls' deadlines, of every sampler on any loop: the node's devices' calls of one tick
# share a timer (keyed by loop and moment; an entry lives while its calls are in flight).
_DEADLINES = Deadlines()


@dataclass
class SamplerStats:
    """Per-device counters for self-telemetry and the benchmark suite."""

    cycles: int = 0
    missed_cycles: int = 0
    deadline_overruns: int = 0
    errors: int = 0
    read_seconds_total: float = 0.0  # time in successful group reads
    last_read_seconds: dict[str, float] = field(default_factory=dict)  # per group


class HealthReport(Protocol):
    """Where the sampler says whether each device answers (``gpu_health.verdict.HealthBoard``
    implements it): ``state`` OK, DEGRADED (a call hangs) or FAILED (lost). On the event loop."""

    def reachability(self, uuid: str, state: HealthState, reason: str) -> None: ...

    def forget(self, uuid: str) -> None: ...


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
        relay: Relay | None = None,
        health: HealthReport | None = None,
    ) -> None:
        self._device = device
        self._observer = observer
        self._health = health
        self._store = store
        self._config = config
        self._clock_ns = clock_ns
        self._worker = DeviceWorker(f"gpu-{device.identity.index}", relay)
        self._available = asyncio.Event()
        self._reprobe_now = asyncio.Event()
        self._groups: frozenset[str] = frozenset()  # the loops: own groups and partitions'
        self._own_groups: frozenset[str] = frozenset()
        self._partitioned = isinstance(device, Partitioned)
        self._partitions: dict[str, PartitionState] = {}
        self._scan_due = 0.0  # loop time of the next partition scan
        self._running: set[str] = set()
        # The read job of each (group, read by the device itself) of an unpartitioned device.
        self._own_jobs: dict[tuple[str, bool], Callable[[], TreeRead[Any]]] = {}
        self._snapshot = DeviceSnapshot(device.identity, HealthState.OK, clock_ns())
        # Outlives health changes: a counter that restarted while the device was down still
        # compares with its last value from before.
        self._counters = CounterRestarts(self._snapshot.start_time_ns)
        self.stats = SamplerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._hung = False  # a call overran its deadline and has not returned yet
        self._logged_failures: set[tuple[str, str]] = set()  # (what, exception type) logged
        self._attribution = attribution if isinstance(device, ProcessReader) else None
        self._report(self._snapshot)

    @property
    def busy(self) -> bool:
        return self._worker.busy

    @property
    def snapshot(self) -> DeviceSnapshot:
        return self._snapshot

    @property
    def partitions(self) -> tuple[DeviceSnapshot, ...]:
        """The latest snapshots of the device's partitions (MIG instances ...)."""
        return tuple(p.snapshot for p in self._partitions.values())

    def rescan_partitions(self) -> None:
        """The vendor said the partitioning changed: scan at the next read. On the event loop."""
        self._scan_due = 0.0

    async def run(self) -> None:
        await self._probe_until_available()
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks  # the re-probe of a lost device runs here too, and dies with it
            self._start_loops()

    def _start_loops(self) -> None:
        """A loop per group of the device or of any partition (a new partition may add one)."""
        if self._tasks is None:
            return
        for group in sorted(self._groups - self._running):
            self._running.add(group)
            self._tasks.create_task(self._group_loop(group), name=f"{self._name}:{group}")

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
        loop = self._loop
        assert loop is not None  # set before the first call (_probe_until_available)
        timeout = self._config.current.call_timeout
        future = self._worker.run_on_loop(fn, loop)
        call = self._device.current_call
        # One waiter per call and one timer per deadline moment (every device's calls of a
        # tick share it: threads.deadlines), not asyncio.timeout around wrap_future: that
        # added a Timeout (two coroutines, a running-loop lookup that calls getpid() on
        # 3.11), a timer per call and a call_soon_threadsafe per result; the relay now sets
        # a round's results on the loop in one call and the job sets each on its waiter at
        # once (threads.handoff.LoopJob, no concurrent.futures.Future per call).
        waiter = future.waiter
        deadline = loop.time() + timeout
        _DEADLINES.arm(loop, deadline, waiter)
        try:
            return await waiter
        except TimeoutError:
            call = self._device.current_call or call
            self.stats.deadline_overruns += 1
            self._hung = True
            future.cancel()  # not started yet: it never runs (as wrap_future's did)
            future.add_done_callback(self._on_call_done)  # tells us when it finally returns
            if self._observer is not None:
                self._observer.unresponsive(self._uuid, call, timeout)
            self._set_health(HealthState.DEGRADED, f"unresponsive: {call} exceeded {timeout:g}s")
            raise CallOverrun(call, timeout) from None
        except asyncio.CancelledError:
            future.cancel()  # shutting down: a job not started yet need not run
            raise
        finally:
            _DEADLINES.disarm(loop, deadline, waiter)

    def _on_call_done(self, future: LoopJob[Any]) -> None:
        # Runs on the worker thread once the hung call returns; hop back to the loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._after_hang, future)

    def _after_hang(self, future: LoopJob[Any]) -> None:
        if not self._hung or future.cancelled():
            return  # a cancelled job never ran: the hung one is still in its call
        self._hung = False
        error = future.exception()
        if isinstance(error, DeviceLost):
            self._lost(self._down(error))
            return
        if self._observer is not None:
            self._observer.responsive(self._uuid)
        if self._snapshot.health is HealthState.DEGRADED:
            self._set_health(HealthState.OK, "")

    def _report(self, snapshot: DeviceSnapshot) -> None:
        if self._health is not None:
            self._health.reachability(snapshot.identity.uuid, snapshot.health, snapshot.reason)

    def _set_health(self, health: HealthState, reason: str) -> None:
        if health is self._snapshot.health and reason == self._snapshot.reason:
            return
        if health is HealthState.OK:
            log.info("%s: %s", self._name, "responding again" if self._snapshot.reason
                     else "ok")
        else:
            log.warning("%s: %s", self._name, reason)
            self._withdraw_processes()  # absent, like every other reading
        self._publish(self._snapshot.with_health(health, reason))
        self._report(self._snapshot)
        for part in self._partitions.values():  # they live on the parent's thread and fate
            part.snapshot = part.snapshot.with_health(health, reason)
            self._store.put(part.snapshot)
            self._report(part.snapshot)

    def _withdraw_processes(self) -> None:
        """The device's and its partitions' process series go until their next list."""
        if self._attribution is None:
            return
        for uuid in (self._uuid, *self._partitions):
            self._attribution.withdraw(uuid)

    def _mark_lost(self, reason: str) -> None:
        self._available.clear()
        if self._observer is not None:
            self._observer.lost(self._uuid, reason)
        self._set_health(HealthState.FAILED, f"lost: {reason}")

    @staticmethod
    def _down(exc: DeviceLost) -> str:
        """Why a device is down: a GPU that asks for a reset says so (not just "lost")."""
        return f"reset required: {exc}" if isinstance(exc, DeviceNeedsReset) else str(exc)

    def _failed(self, what: str, exc: Exception) -> None:
        """An unexpected failure: counted every time, logged in full once per kind (a flaky
        driver repeats it every cycle; the count is in gpu_agent.read.errors)."""
        self.stats.errors += 1
        key = (what, type(exc).__name__)
        if key in self._logged_failures:
            log.debug("%s: %s failed again: %s", self._name, what, exc)
            return
        self._logged_failures.add(key)
        log.error("%s: %s failed (further failures of this kind are counted in "
                  "gpu_agent.read.errors, not logged)", self._name, what, exc_info=exc)

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
                groups, found = await self._call(self._probe_tree)
                self._own_groups = self._allowed(groups)
                if found is not None:
                    self._apply_enumeration(found)
                self._groups = self._own_groups.union(
                    *(p.groups for p in self._partitions.values()))
            except (DeviceLost, CallOverrun) as exc:
                if isinstance(exc, DeviceLost):
                    self._mark_lost(self._down(exc))
                await self._pause(self._config.current.lost_reprobe_interval)
                continue
            except Exception as exc:
                # Whatever else the probe meets (a transient library error a backend let
                # through) must not end this device's sampling: try again later.
                self._failed("probe", exc)
                await self._pause(self._config.current.lost_reprobe_interval)
                continue
            log.info("%s: serving groups %s", self._name, ", ".join(sorted(self._groups)))
            if self._observer is not None:
                self._observer.available(self._uuid)
            self._set_health(HealthState.OK, "")
            self._available.set()
            self._start_loops()
            return

    def _probe_tree(self) -> tuple[frozenset[str], Enumerated | None]:
        """The device's groups and, if it can be partitioned, its partitions (on the worker)."""
        groups = self._device.probe()
        if not self._partitioned:
            return groups, None
        return groups, enumerate_partitions(self._device, frozenset(self._partitions))

    def _allowed(self, groups: frozenset[str]) -> frozenset[str]:
        return groups if self._attribution is not None else groups - {PROCESS_GROUP}

    def _apply_enumeration(self, found: Enumerated) -> None:
        """Partitions appear and vanish with the parent's configuration (no restart)."""
        loop = asyncio.get_running_loop()
        interval = self._config.current.groups.get("slow")
        self._scan_due = loop.time() + (interval.interval if interval is not None
                                        and interval.enabled else PARTITION_SCAN_SECONDS)
        now = {d.identity.uuid: d for d in found.devices}
        for uuid in [u for u in self._partitions if u not in now]:
            self._drop_partition(uuid)
        for uuid, device in now.items():
            if uuid in self._partitions:
                continue
            groups = self._allowed(found.probed.get(uuid, frozenset()))
            log.info("%s: partition %s appeared, serving groups %s", self._name, uuid,
                     ", ".join(sorted(groups)))
            self._partitions[uuid] = PartitionState(
                device, groups, DeviceSnapshot(device.identity, HealthState.OK, self._clock_ns()))
            self._report(self._partitions[uuid].snapshot)
        added = set().union(*(p.groups for p in self._partitions.values())) - self._groups
        if added:
            self._groups = self._groups | added
            self._start_loops()

    def _drop_partition(self, uuid: str) -> None:
        if self._partitions.pop(uuid, None) is None:
            return
        log.info("%s: partition %s is gone", self._name, uuid)
        self._store.remove(uuid)
        if self._health is not None:
            self._health.forget(uuid)
        if self._attribution is not None:
            self._attribution.forget(uuid)

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
                if group == PROCESS_GROUP:
                    self._withdraw_processes()
                await self._config.sleep(3600.0)
                next_due = loop.time()
                continue
            if not self._available.is_set():
                await self._available.wait()
                next_due = loop.time()
            # Until the tick itself (not for a delay): every device's loops due on it share
            # its timer (ConfigHolder.sleep_until).
            if next_due > loop.time() and await self._config.sleep_until(loop, next_due):
                next_due = loop.time()  # reconfigured: start the new cadence now
                continue
            # The next read falls on the interval's grid of the loop clock, shared by every
            # device: all GPUs' timers fire in one loop wake-up and their jobs run back to
            # back (warm caches, batched hand-offs) instead of eight times a second apart.
            # Each still runs on its own thread under its own deadline.
            next_due = grid_after(next_due + settings.interval / 2, settings.interval)
            now = loop.time()
            if next_due < now:  # fell behind (a slow call): skip, don't burst to catch up
                self.stats.missed_cycles += int((now - next_due) // settings.interval) + 1
                next_due = grid_after(now + settings.interval / 2, settings.interval)
            if self._hung:
                # Queueing behind a hung call would only pile up stale work.
                self.stats.missed_cycles += 1
                continue
            await self._sample(group)

    @staticmethod
    def _memory_total(snapshot: DeviceSnapshot) -> int | None:
        fast = snapshot.samples.get("fast")
        for reading in fast.readings if fast else ():
            if reading.metric == "hw.gpu.memory.limit":
                return int(reading.value)
        return None

    def _serves(self, group: str) -> Callable[[str, frozenset[str]], bool]:
        def serves(uuid: str, probed: frozenset[str]) -> bool:
            part = self._partitions.get(uuid)
            groups = part.groups if part is not None else self._allowed(probed)
            return group in groups
        return serves

    def _tree_job(self, group: str) -> Callable[[], TreeRead[Any]]:
        """The job reading the device's group and its partitions' (one thread, one deadline).

        A device without partitions has the same job on every read of a group between
        partition scans: made once, not two closures, a lambda and a dict per read."""
        own = group in self._own_groups
        loop = self._loop
        assert loop is not None  # set before the first call (_probe_until_available)
        if self._partitioned and loop.time() >= self._scan_due:
            scan: frozenset[str] | None = frozenset(self._partitions)
        elif not self._partitions:
            job = self._own_jobs.get((group, own))
            if job is None:
                job = self._own_jobs[(group, own)] = self._make_job(group, own, {}, None)
            return job
        else:
            scan = None
        parts = {u: p.device for u, p in self._partitions.items()}
        return self._make_job(group, own, parts, scan)

    def _make_job(self, group: str, own: bool, parts: dict[str, Device],
                  scan: frozenset[str] | None) -> Callable[[], TreeRead[Any]]:
        if not parts and scan is None:
            return functools.partial(read_own, self._own_read(group) if own else None)
        read: Callable[[Device], Any]
        if group == PROCESS_GROUP:
            def read(device: Device) -> Any:
                return device.read_processes() if isinstance(device, ProcessReader) else ()
        else:
            def read(device: Device) -> Any:
                return device.read(group)
        return functools.partial(read_tree, self._device, read, parent_reads=own,
                                 partitions=parts, enumerate_known=scan,
                                 serves=self._serves(group))

    def _own_read(self, group: str) -> Callable[[], Any]:
        """The device's own read of ``group`` (``_make_job``'s ``read`` of the device itself)."""
        device = self._device
        if group != PROCESS_GROUP:
            return functools.partial(device.read, group)
        if isinstance(device, ProcessReader):
            return device.read_processes
        return tuple

    def _readings(self, identity_snapshot: DeviceSnapshot, group: str,
                  data: Any) -> tuple[Reading, ...]:
        """A group's readings. A process list goes to attribution, which publishes the
        attributed processes into the store itself (and again whenever attribution changes),
        unless the device is down (a late answer is recorded, not published)."""
        if group != PROCESS_GROUP:
            return tuple(data)
        assert self._attribution is not None
        identity = identity_snapshot.identity
        memory_total = self._memory_total(identity_snapshot)
        with Stage(ATTRIBUTION):
            if identity_snapshot.health is HealthState.OK:
                return self._attribution.publish(identity, tuple(data), memory_total,
                                                 self._clock_ns())
            return self._attribution.readings(identity, tuple(data), memory_total)

    async def _sample(self, group: str) -> None:
        started = time.perf_counter()
        try:
            tree = await self._call(self._tree_job(group))
        except CallOverrun:
            return
        except ReadSkipped as exc:
            self.stats.errors += 1
            log.debug("%s: group %s skipped this cycle: %s", self._name, group, exc)
            return
        except DeviceLost as exc:
            self._lost(self._down(exc))
            return
        except Exception as exc:
            self._failed(f"reading group {group}", exc)
            return
        with Stage(SNAPSHOT):
            self._sampled(group, tree, started)

    def _sampled(self, group: str, tree: TreeRead[Any], started: float) -> None:
        """What a read brought: readings (attributed, for processes), published."""
        try:
            readings = (self._readings(self._snapshot, group, tree.parent)
                        if tree.parent is not None else None)
        except Exception as exc:
            self._failed(f"reading group {group}", exc)
            return
        self.stats.cycles += 1
        elapsed = time.perf_counter() - started
        self.stats.read_seconds_total += elapsed
        self.stats.last_read_seconds[group] = elapsed
        if readings is not None and self._observer is not None:
            self._observer.sampled(self._uuid, group, readings)
        if self._snapshot.health is not HealthState.OK:
            return  # a late answer from a device already marked down must not revive it
        now = self._clock_ns()
        if readings is not None:
            snapshot = self._snapshot
            # Processes are attribution's (published by it); the device is put all the same,
            # so one that serves only that group is in the store for its processes to join.
            if group != PROCESS_GROUP:
                snapshot = snapshot.with_sample(GroupSample(group, readings, now))
            if self._counters.observe(readings, now):
                snapshot = replace(snapshot, counter_starts=MappingProxyType(
                    self._counters.starts()))
                log.info("%s: a counter went backwards (driver reload, reset or wrap): its "
                         "series restarts with a new start time", self._name)
            self._publish(snapshot)
        # A device without partitions (every GPU without MIG) reads none: nothing to apply.
        if tree.partitions or tree.enumerated is not None or tree.gone or tree.failed:
            self._apply_partitions(group, tree, now)

    def _apply_partitions(self, group: str, tree: TreeRead[Any], now: int) -> None:
        if tree.enumerated is not None:
            self._apply_enumeration(tree.enumerated)
        for uuid in tree.gone:
            self._drop_partition(uuid)
        if tree.gone:
            self._scan_due = 0.0  # a destroyed partition: others may have been created
        self.stats.errors += tree.failed
        for uuid, data in tree.partitions.items():
            part = self._partitions.get(uuid)
            if part is None:
                continue
            readings = self._readings(part.snapshot, group, data)
            if group != PROCESS_GROUP:  # processes: published by attribution
                part.snapshot = part.snapshot.with_sample(GroupSample(group, readings, now))
            self._store.put(part.snapshot)
