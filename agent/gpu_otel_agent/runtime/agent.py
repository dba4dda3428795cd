"""The running agent: backends, one sampler per device, the exporter, signals and reload.

SIGHUP reloads the configuration; SIGUSR1 logs the CPU spent so far per stage and thread
(``threads.costs``). Shutdown order (SIGTERM/SIGINT): stop sampling, one final export bounded by
``shutdown_timeout``, close the backends unless a device is stuck in a call. Hung device
threads are daemons, so they never hold the process up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpu_otel_agent.backends.discovery import OpenBackend, installed_backends, open_backends
from gpu_otel_agent.backends.protocol import PROCESS_GROUP, Backend
from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import ConfigError, Overrides, load, restart_needed
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.metrics.exporters import build_snapshot_exporter
from gpu_otel_agent.export.metrics.pusher import MetricPusher
from gpu_otel_agent.export.metrics.tracing import SpanRecorder, TracedExporter, build_tracer
from gpu_otel_agent.export.prometheus import EndpointError
from gpu_otel_agent.gpu_health.verdict import HealthBoard
from gpu_otel_agent.local.endpoint import (
    LocalEndpoint,
    LocalEndpointError,
    LocalEndpointTaken,
)
from gpu_otel_agent.local.routes import Sources, build_routes
from gpu_otel_agent.model.resource import ResourceView
from gpu_otel_agent.model.semconv import agent_resource
from gpu_otel_agent.model.snapshot import SnapshotStore
from gpu_otel_agent.model.workload import WorkloadLookup
from gpu_otel_agent.runtime.attribution_setup import attribution_parts, workload_service
from gpu_otel_agent.runtime.config_watch import watch_config_file
from gpu_otel_agent.runtime.health_pipeline import HealthRuntime
from gpu_otel_agent.runtime.node_plugins import (
    RunningNodePlugin,
    open_node_plugins,
    process_events,
)
from gpu_otel_agent.runtime.reliability import ReliabilityValues
from gpu_otel_agent.runtime.sampler_directory import SamplerDirectory
from gpu_otel_agent.runtime.self_telemetry import ExportValues, SelfTelemetry
from gpu_otel_agent.sampling.sampler import DeviceSampler
from gpu_otel_agent.threads import costs
from gpu_otel_agent.threads.relay import Relay
from gpu_otel_agent.version import VERSION
from gpu_otel_agent.workloads.attribution import Attribution
from gpu_otel_agent.workloads.service import WorkloadService

if TYPE_CHECKING:
    from gpu_otel_agent.export.prometheus.server import MetricsEndpoint

log = logging.getLogger(__name__)
COSTS_MARK = "cycle costs "
TASK_STOP_SECONDS = 1.0
WATCHDOG_GRACE_SECONDS = 1.5
# How often an agent whose local socket another agent serves tries to take it over: a connect,
# cheap enough that tools (npd, top) find the remaining agent within seconds.
TAKEOVER_INTERVAL_S = 2.0


def _exit_if_still_running_after(seconds: float) -> None:
    """The promise is "SIGTERM exits within seconds": keep it even if a library call hangs."""

    def expire() -> None:
        log.error("shutdown took longer than %.1fs; exiting now", seconds)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def build_resource(config: AgentConfig, opened: list[OpenBackend]) -> ResourceView:
    """The node's resource. Driver versions are on each device's points (hw.driver_version),
    where a mixed node can say which GPU runs which driver."""
    del opened
    return agent_resource(config.node_name)


@dataclass(frozen=True)
class _Parts:
    """What start-up built that the agent's own attributes do not hold."""

    opened: list[OpenBackend]
    resource: ResourceView
    tracer: SpanRecorder
    telemetry: SelfTelemetry
    workloads: WorkloadService | None  # keeps attribution current


@dataclass(frozen=True)
class _Started:
    endpoint: MetricsEndpoint | None
    local: LocalEndpoint | None
    tasks: list[asyncio.Task[None]]


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        config_path: Path | None = None,
        overrides: Overrides | None = None,
        backends: list[Backend] | None = None,
        workloads: WorkloadLookup | None = None,
        *,
        adjust: Callable[[AgentConfig], AgentConfig] | None = None,
    ) -> None:
        self._initial = config
        # What the command changes of every configuration it loads (a simulated run's paths),
        # so a reload compares like with like.
        self._adjust = adjust or (lambda config: config)
        self._workloads = workloads
        self.health: HealthRuntime | None = None
        self._config_path = config_path
        self._overrides = overrides or Overrides()
        self._backends = backends
        self._stop = asyncio.Event()
        self.store = SnapshotStore()
        # Decides each device's health, from its sampler and (events on) the health engine.
        self.board = HealthBoard(self.store)
        self.samplers: list[DeviceSampler] = []
        self.attribution: Attribution | None = None
        self.node_plugins: list[RunningNodePlugin] = []
        self._reloads: set[asyncio.Task[None]] = set()
        self._reload_lock = asyncio.Lock()
        # The live configuration every part reads and a reload replaces.
        self._holder = ConfigHolder(config)

    def request_stop(self) -> None:
        self._stop.set()

    def reload(self) -> None:
        """Re-read file and environment (SIGHUP, a change of the file): on a worker thread,
        so no file can block the event loop; keep the running configuration if the new one
        is bad."""
        task = asyncio.get_running_loop().create_task(self._reload(), name="config-reload")
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)
        task.add_done_callback(_report_crash)

    async def _reload(self) -> None:
        async with self._reload_lock:  # one at a time, in the order asked
            try:
                new = self._adjust(
                    await asyncio.to_thread(load, self._config_path, self._overrides))
            except ConfigError as error:
                log.error("configuration reload rejected, keeping the running one: %s", error)
                return
            old = self._holder.current
            if new == old:
                return
            later = restart_needed(old, new)
            if later:
                log.warning("changed keys take effect at the next restart: %s",
                            ", ".join(later))
            logging.getLogger().setLevel(new.log_level.upper())
            self._holder.replace(new)
            log.info("configuration reloaded")

    async def _watch_file(self) -> None:
        if self._config_path is not None:
            await watch_config_file(self._config_path, self.reload)

    async def run(self) -> int:
        """Start-up in phases, each building objects complete for the next; then wait for a
        stop, and stop in the reverse order."""
        self._handle_signals()
        opened = await self._open_backends()
        if not opened:
            return 1
        parts = self._assemble(opened)
        try:
            started = self._start(parts)
        except EndpointError as error:
            log.error("%s", error)
            self._close_backends(opened)
            return 2
        # Everything made so far (modules, libraries' tables, the backends) lives as long as
        # the agent: out of the collector's sight, a full collection walks only what cycles
        # allocate, not a few hundred thousand start-up objects each time.
        gc.freeze()
        await self._stop.wait()
        await self._shut_down(parts, started)
        log.info("run summary %s", json.dumps(self.summary(), sort_keys=True))
        return 0

    # -- start-up phases -----------------------------------------------------------------

    def _handle_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        loop.add_signal_handler(signal.SIGUSR1, _log_costs)

    async def _open_backends(self) -> list[OpenBackend]:
        backends = self._backends if self._backends is not None else installed_backends()
        opened = await open_backends(backends, timeout=max(self._initial.call_timeout * 5, 10))
        if not opened:
            log.error(
                "no GPU backend could start on this node; nothing to monitor "
                "(without a GPU, try: gpu-agent run --simulate h100-8gpu, a simulated "
                "node: gpu-otel-agent-simulator)"
            )
        return opened

    def _assemble(self, opened: list[OpenBackend]) -> _Parts:
        """Build every part, bottom up: who processes belong to, the node plugins (which read
        that), the health pipeline, the samplers (which report to it), the export and the
        agent's own telemetry (which reads them all)."""
        config = self._initial
        resource = build_resource(config, opened)
        uuids = tuple(device.identity.uuid for backend in opened for device in backend.devices)
        parts = (attribution_parts(config.attribution, self.store)
                 if config.attribution.enabled else None)
        self.attribution = parts.attribution if parts is not None else None
        attribution = self.attribution
        self.node_plugins = open_node_plugins(config, lambda: attribution, lambda: uuids,
                                              self.store)
        workloads = (workload_service(config.attribution, parts.resolver,
                                      process_events(config, self.node_plugins))
                     if parts is not None else None)
        # The one join both ways: the health engine asks samplers to re-probe (through the
        # directory) and the samplers report to the engine; the directory is filled with the
        # samplers in the next phase, before anything runs.
        directory = SamplerDirectory()
        self.health = self._build_health(opened, resource, directory)
        relay = Relay()  # the node's devices due together read in turn (threads.relay)
        self.samplers = self._build_samplers(opened, relay)
        directory.add(self.samplers)
        tracer = build_tracer(config, resource)
        exporter = build_snapshot_exporter(config, resource)
        self.pusher = MetricPusher(
            TracedExporter(exporter, tracer) if config.tracing.enabled else exporter,
            self.store, self._holder, device_count=len(self.samplers), rounds=relay,
        )
        telemetry = self._build_telemetry(opened)
        return _Parts(opened, resource, tracer, telemetry, workloads)

    def _build_health(self, opened: list[OpenBackend], resource: ResourceView,
                      directory: SamplerDirectory) -> HealthRuntime | None:
        if not self._initial.health.enabled:
            return None
        # Attribution's lookup knows containers and pods; the backend's only PIDs. It is
        # filled by the processes group, so without that group it would name nobody.
        processes = self._initial.groups.get(PROCESS_GROUP)
        attribution = (self.attribution if processes is not None and processes.enabled
                       else None)
        return HealthRuntime(self._initial, resource, opened, self.store,
                             self._workloads or attribution, board=self.board,
                             sampling=directory)

    def _build_samplers(self, opened: list[OpenBackend], relay: Relay) -> list[DeviceSampler]:
        observer = self.health.engine if self.health is not None else None
        return [
            DeviceSampler(device, self.store, self._holder, attribution=self.attribution,
                          observer=observer, relay=relay, health=self.board)
            for backend in opened
            for device in backend.devices
        ]

    def _build_telemetry(self, opened: list[OpenBackend]) -> SelfTelemetry:
        pusher = self.pusher
        telemetry = SelfTelemetry(time.time_ns())
        telemetry.watch_samplers(self.samplers)
        telemetry.watch_devices(device for backend in opened for device in backend.devices)
        telemetry.add(ExportValues(pusher.stats))
        telemetry.add(ReliabilityValues())
        if self.health is not None:
            telemetry.add(self.health.values())
        for node_plugin in self.node_plugins:
            telemetry.add(node_plugin.readings)
        self.store.set_agent_source(telemetry.sample)
        return telemetry

    def _start(self, parts: _Parts) -> _Started:
        """Serve the endpoints, then start every task. Raises EndpointError if the
        Prometheus endpoint cannot start (nothing else started yet)."""
        endpoint = self._start_endpoint(parts.resource, parts.telemetry, parts.tracer)
        local, taken = self._start_local_endpoint()
        tasks = [asyncio.create_task(s.run(), name=f"sampler-{i}")
                 for i, s in enumerate(self.samplers)]
        tasks.append(asyncio.create_task(self.pusher.run(), name="export"))
        tasks.append(asyncio.create_task(self._watch_file(), name="config-watch"))
        if local is not None and taken:
            tasks.append(asyncio.create_task(_take_over(local), name="local-endpoint-takeover"))
        if parts.workloads is not None:
            tasks.append(asyncio.create_task(parts.workloads.run(), name="workloads"))
        tasks.extend(asyncio.create_task(p.plugin.run(), name=p.name)
                     for p in self.node_plugins)
        if self.health is not None:
            tasks.extend(self.health.start())
        for task in tasks:
            task.add_done_callback(_report_crash)
        return _Started(endpoint, local, tasks)

    async def _shut_down(self, parts: _Parts, started: _Started) -> None:
        log.info("stopping")
        budget = self._holder.current.shutdown_timeout
        _exit_if_still_running_after(budget + WATCHDOG_GRACE_SECONDS)
        for task in started.tasks:
            task.cancel()
        _, pending = await asyncio.wait(started.tasks, timeout=TASK_STOP_SECONDS)
        if pending:
            log.warning("%d task(s) did not stop in time: %s", len(pending),
                        ", ".join(t.get_name() for t in pending))
        if self.health is not None:
            # Events first: they are few, and what is not sent must reach the spool.
            self.health.close(budget * 0.3)
        await self.pusher.close(budget * (0.7 if self.health is not None else 1.0))
        if started.endpoint is not None:
            started.endpoint.stop()
        if started.local is not None:
            started.local.stop()
        parts.tracer.shutdown(0.5)
        for node_plugin in self.node_plugins:
            node_plugin.close()
        self._close_backends(parts.opened)

    def _start_endpoint(
        self, resource: ResourceView, telemetry: SelfTelemetry, tracer: SpanRecorder
    ) -> MetricsEndpoint | None:
        """The Prometheus endpoint if configured. Raises EndpointError if it cannot start."""
        if not self._initial.prometheus.enabled:
            return None
        from gpu_otel_agent.export.prometheus.probes import HealthCheck
        from gpu_otel_agent.export.prometheus.server import MetricsEndpoint

        health = HealthCheck(self.store, len(self.samplers), lambda: self._holder.current)
        endpoint = MetricsEndpoint(lambda: self._holder.current, self.store,
                                   dict(resource.attributes), health, tracer)
        endpoint.start()
        telemetry.add(endpoint.readings)
        return endpoint

    def _start_local_endpoint(self) -> tuple[LocalEndpoint | None, bool]:
        """The read-only socket of ``gpu-agent top``, and whether another agent holds it (then
        the endpoint is returned unstarted, to be taken over when that one is gone). It is a
        window onto the agent, not its job: when it cannot start, the agent says why and goes
        on sampling and exporting."""
        settings = self._initial.local_endpoint
        if not settings.enabled:
            return None, False
        path = Path(settings.socket)
        sources = Sources(
            store=self.store,
            events=self.health.recent if self.health is not None else None,
            agent={"version": VERSION, "pid": os.getpid(), "host": socket.gethostname(),
                   "node": self._initial.node_name, "socket": str(path),
                   "exporter": self._initial.exporter, "started_ns": time.time_ns()},
        )
        local = LocalEndpoint(path, settings.group, build_routes(sources))
        try:
            local.start()
        except LocalEndpointTaken:
            log.error("local endpoint (gpu-agent top, npd) is off while %s serves %s: one agent "
                      "per node. Stop that one, or give this one a socket and spool of its own "
                      "(local_endpoint.socket / GPU_AGENT_LOCAL_SOCKET, health.spool_path / "
                      "GPU_AGENT_EVENT_SPOOL); this one takes the socket over once that one "
                      "is gone", _who_serves(path), path)
            return local, True
        except LocalEndpointError as error:
            if os.geteuid() == 0:
                log.error("local endpoint (gpu-agent top) is off: %s", error)
            else:  # a user's own run (a laptop): the default path under /run is root's
                log.warning("local endpoint (gpu-agent top) is off: %s; as a user, set "
                            "local_endpoint.socket (GPU_AGENT_LOCAL_SOCKET) to a path in a "
                            "directory of yours", error)
            return None, False
        return local, False

    def summary(self) -> dict[str, object]:
        """Counters of the whole run, logged as one JSON line at exit (read by the benchmarks)."""
        return {
            "devices": {
                s.snapshot.identity.uuid: dataclasses.asdict(s.stats) for s in self.samplers
            },
            "exports": self.pusher.stats.exports,
            "export_failures": self.pusher.stats.failures,
            "exports_skipped": self.pusher.stats.skipped,
            "health": (dataclasses.asdict(self.health.telemetry())
                       if self.health is not None else None),
        }

    def _close_backends(self, opened: list[OpenBackend]) -> None:
        for sampler in self.samplers:
            sampler.close()
        if any(s.busy for s in self.samplers):
            # Shutting NVML down under a thread that is inside it can crash; the OS cleans up.
            log.warning("a device is still in a call; leaving the GPU library open at exit")
            return
        for backend in opened:
            backend.backend.close()


def _who_serves(path: Path) -> str:
    """The agent at ``path`` as it names itself, for a person deciding which one to stop."""
    # Imported here, when another agent holds the socket: http.client (0.3 MiB resident with
    # the email modules it brings) is not on a lone agent's path (issue 41).
    from gpu_otel_agent.local.client import LocalClientError, get

    try:
        agent = get(path, "/v1/snapshot", TAKEOVER_INTERVAL_S)["agent"]
    except (LocalClientError, KeyError, TypeError):
        return "another process"
    return f"agent pid {agent.get('pid', '?')} (version {agent.get('version', '?')})"


async def _take_over(local: LocalEndpoint) -> None:
    """Serve the socket once its owner is gone: it unlinked it at exit, or died and left it
    stale (a refused connect; ``LocalEndpoint.start`` removes such a socket and binds)."""
    while True:
        await asyncio.sleep(TAKEOVER_INTERVAL_S)
        try:
            await asyncio.to_thread(local.start)
        except LocalEndpointTaken:
            continue
        except LocalEndpointError as error:
            log.error("local endpoint (gpu-agent top) is off: %s", error)
            return
        log.info("local endpoint: took over %s (the agent that served it is gone)", local.path)
        return


def _log_costs() -> None:
    """SIGUSR1: CPU so far per stage and per thread (the benchmark's per-cycle breakdown)."""
    log.info("%s%s", COSTS_MARK, json.dumps(
        {"stages": costs.spent(), "threads": costs.threads(), "process": costs.process()},
        sort_keys=True))


def _report_crash(task: asyncio.Task[None]) -> None:
    """A task that dies of a bug must say so: nothing else would notice a GPU go quiet."""
    if not task.cancelled() and task.exception() is not None:
        log.error("task %s stopped", task.get_name(), exc_info=task.exception())
