"""The eBPF plugin on the agent's event loop.

The ring buffer's epoll fd is watched by the loop: exec/exit records are decoded there, passed
to the workload resolver when it takes its process events from here, and queued for the
plugin's cycle. The cycle runs in a worker thread every ``interval`` (or at once when a traced
process exits): it finds the CUDA libraries of new GPU processes, attaches and detaches
uprobes, reads the counters of the traced processes and publishes the readings.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.model.snapshot import AgentSample, Reading
from gpu_otel_agent.model.workload import GpuProcess
from gpu_otel_agent.plugins.ebpf import compile_bpf
from gpu_otel_agent.plugins.ebpf.activity import Activity
from gpu_otel_agent.plugins.ebpf.layout import Counter, CudaStats, EventKind, LifecycleEvent
from gpu_otel_agent.plugins.ebpf.libbpf import BpfError
from gpu_otel_agent.plugins.ebpf.libraries import MappedLibrary, mapped_libraries
from gpu_otel_agent.plugins.ebpf.reaper import LinkReaper
from gpu_otel_agent.plugins.ebpf.support import load_failure, missing_support
from gpu_otel_agent.plugins.ebpf.tracer import Tracer
from gpu_otel_agent.plugins.ebpf.uprobes import ProbeSet
from gpu_otel_agent.workloads.lifecycle import ProcessCallbacks, ProcessEvents

log = logging.getLogger(__name__)
# After a wake-up the ring buffer rests this long, so an exec/exit storm costs a bounded number
# of wake-ups a second, each draining everything queued.
COALESCE_SECONDS = 0.05
GONE_SECONDS = 30.0  # an exited PID is not traced again for this long (its list may lag)
RESCAN_SECONDS = 10.0  # a GPU process without both CUDA libraries is looked at again after this
STALE_SWEEP_SECONDS = 60.0  # counters of processes whose exit event was lost are dropped


@dataclass(frozen=True)
class EbpfSettings:
    object_path: Path = compile_bpf.OBJECT
    interval: float = 1.0
    max_allocations: int = 65536
    workload_retention: float = 300.0
    proc_root: Path = Path("/proc")
    max_process_series: int = 1024


GpuProcesses = Callable[[], Mapping[int, GpuProcess]]
Publish = Callable[[tuple[AgentSample, ...]], None]


def open_plugin(settings: EbpfSettings, gpu_processes: GpuProcesses,
                publish: Publish) -> EbpfPlugin | None:
    """The plugin, or None after logging the one reason it cannot run here."""
    reason = missing_support(settings.object_path)
    if reason is None:
        try:
            return EbpfPlugin(settings, gpu_processes, publish)
        except (BpfError, OSError) as error:
            reason = load_failure(error)
    log.warning("eBPF plugin off: %s; the agent runs on without per-process CUDA activity",
                reason)
    return None


@dataclass(frozen=True)
class _Scan:
    libraries: tuple[MappedLibrary, ...]
    at: float

    @property
    def complete(self) -> bool:
        return len({library.kind for library in self.libraries}) == 2


class EbpfPlugin:
    def __init__(self, settings: EbpfSettings, gpu_processes: GpuProcesses,
                 publish: Publish) -> None:
        self._settings = settings
        self._gpu_processes = gpu_processes
        self._publish = publish
        self._tracer = Tracer(settings.object_path, settings.max_allocations, self._on_record)
        self._reaper = LinkReaper()
        self._probes = ProbeSet(self._tracer, self._reaper.release)
        self._activity = Activity(int(settings.workload_retention * 1e9),
                                  settings.max_process_series)
        self._callbacks: ProcessCallbacks | None = None
        self._watched: frozenset[int] | None = None  # the resolver's PIDs (None: all)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = False
        self._wake = asyncio.Event()
        self._lock = threading.Lock()  # the loop queues events, the worker takes them
        self._cycling = threading.Lock()  # close() waits for a cycle still in its thread
        self._closed = False
        self._events: collections.deque[LifecycleEvent] = collections.deque()
        self._scans: dict[int, _Scan] = {}
        self._gone: dict[int, float] = {}
        self._lost_seen = 0
        self._swept_at = time.monotonic()
        self._telemetry: tuple[Reading, ...] = ()
        log.info("eBPF plugin loaded (%s)", settings.object_path)

    # -- lifecycle events ----------------------------------------------------------------

    def process_events(self, callbacks: ProcessCallbacks) -> ProcessEvents:
        """The exec/exit source for the workload resolver (``process_events: ebpf``)."""
        return _TracepointEvents(self, callbacks)

    def _subscribe(self, callbacks: ProcessCallbacks | None) -> None:
        self._callbacks = callbacks
        self._tracer.send_lifecycle_events(callbacks is not None, self._watched)

    def _watch(self, pids: Collection[int] | None) -> None:
        self._watched = None if pids is None else frozenset(pids)
        if self._callbacks is not None:
            self._tracer.send_lifecycle_events(True, self._watched)

    def _on_record(self, record: bytes) -> None:
        event = LifecycleEvent.decode(record)
        if event is None:
            return
        callbacks = self._callbacks
        if callbacks is not None:
            if event.kind is EventKind.EXIT:
                callbacks.on_exit(event.pid)
            else:
                callbacks.on_exec(event.pid)
        # An exit with counters is folded into its container; an exec makes the worker look at
        # the process's libraries again (it decides whether it knew the PID: its own state).
        if event.final is not None or event.kind is EventKind.EXEC:
            with self._lock:
                self._events.append(event)
            if event.kind is EventKind.EXIT:
                self._wake.set()  # detach at once if it was a library's last user

    def _readable(self) -> None:
        loop = self._loop
        if loop is None or not self._reading:
            return
        self._tracer.ring.consume()
        fd = self._tracer.ring.epoll_fd
        loop.remove_reader(fd)
        loop.call_later(COALESCE_SECONDS, self._resume)

    def _resume(self) -> None:
        if self._reading and self._loop is not None and not self._loop.is_closed():
            self._tracer.ring.consume()
            self._loop.add_reader(self._tracer.ring.epoll_fd, self._readable)

    # -- the cycle -----------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._reading = True
        loop.add_reader(self._tracer.ring.epoll_fd, self._readable)
        try:
            while True:
                await asyncio.to_thread(self.cycle)
                try:
                    async with asyncio.timeout(self._settings.interval):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                self._wake.clear()
        finally:
            self._reading = False
            if not loop.is_closed():
                loop.remove_reader(self._tracer.ring.epoll_fd)

    def cycle(self) -> None:
        """One read: libraries of new GPU processes, probes, counters, readings."""
        with self._cycling:
            if not self._closed:
                self._cycle()

    def _cycle(self) -> None:
        now = time.monotonic()
        now_ns = time.time_ns()
        with self._lock:
            events = list(self._events)
            self._events.clear()
        for event in events:
            if event.final is not None:
                self._activity.retire(event.pid, event.final, now_ns)
            self._scans.pop(event.pid, None)
            if event.kind is EventKind.EXIT:
                self._gone[event.pid] = now
        self._gone = {pid: at for pid, at in self._gone.items() if now - at < GONE_SECONDS}
        processes = {pid: p for pid, p in self._gpu_processes().items() if pid not in self._gone}
        self._scan(processes, now)
        self._probes.sync({pid: scan.libraries for pid, scan in self._scans.items()
                           if scan.libraries})
        traced = self._probes.traced_pids()
        stats = {pid: self._tracer.stats(pid) or CudaStats() for pid in traced}
        self._publish(self._activity.samples(processes, stats, now_ns))
        self._count(traced, now)

    def _scan(self, processes: Mapping[int, GpuProcess], now: float) -> None:
        for pid in [p for p in self._scans if p not in processes]:
            del self._scans[pid]
        for pid in processes:
            scan = self._scans.get(pid)
            if scan is None or (not scan.complete and now - scan.at >= RESCAN_SECONDS):
                self._scans[pid] = _Scan(mapped_libraries(pid, self._settings.proc_root), now)

    def _count(self, traced: frozenset[int], now: float) -> None:
        lost = self._tracer.counter(Counter.EVENTS_LOST)
        if lost > self._lost_seen and self._callbacks is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._callbacks.on_overflow)
        self._lost_seen = lost
        if now - self._swept_at >= STALE_SWEEP_SECONDS:
            self._swept_at = now
            stale = [pid for pid in self._tracer.pids()
                     if not (self._settings.proc_root / str(pid)).exists()]
            self._tracer.forget(stale)
        self._telemetry = (
            # Libraries still being detached count: their probes still fire.
            Reading("gpu_agent.ebpf.library.count", self._probes.libraries + self._reaper.pending),
            Reading("gpu_agent.ebpf.process.count", len(traced)),
            Reading("gpu_agent.ebpf.events.lost", lost),
            Reading("gpu_agent.ebpf.allocations.untracked",
                    self._tracer.counter(Counter.ALLOCATIONS_FULL)),
            Reading("gpu_agent.ebpf.calls.unpaired", self._tracer.counter(Counter.PENDING_FULL)),
        )

    def readings(self) -> tuple[Reading, ...]:
        """Self-telemetry, as of the last cycle."""
        return self._telemetry

    def close(self, timeout: float = 5.0) -> None:
        """Stops tracing; the uprobes are detached in the background (or by the kernel as the
        process exits), so a shutdown does not wait for them."""
        if not self._cycling.acquire(timeout=timeout):
            log.warning("eBPF plugin: a cycle is still running; leaving its probes to the exit")
            return
        try:
            self._closed = True
            self._probes.close()
            self._tracer.close()
        finally:
            self._cycling.release()


class _TracepointEvents:
    """:class:`gpu_otel_agent.workloads.lifecycle.ProcessEvents` from the plugin's tracepoints."""

    def __init__(self, plugin: EbpfPlugin, callbacks: ProcessCallbacks) -> None:
        self._plugin = plugin
        self._callbacks = callbacks

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        self._plugin._subscribe(self._callbacks)
        log.info("listening to process exec/exit events (eBPF sched tracepoints)")
        return True

    def stop(self) -> None:
        self._plugin._subscribe(None)

    def watch(self, pids: Collection[int] | None) -> None:
        """Filtered in the kernel: the tracepoints look the process up in a map of these."""
        self._plugin._watch(pids)
