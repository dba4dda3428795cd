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
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.backends.discovery import OpenBackend, installed_backends, open_backends
from gpu_otel_agent.backends.protocol import PROCESS_GROUP, Backend
from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import ConfigError, Overrides, load, restart_needed
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.exporters import build_snapshot_exporter
from gpu_otel_agent.export.metric_pusher import MetricPusher
from gpu_otel_agent.export.prometheus import EndpointError
from gpu_otel_agent.export.tracing import SpanRecorder, TracedExporter, build_tracer
from gpu_otel_agent.gpu_health.verdict import HealthBoard
from gpu_otel_agent.local.endpoint import LocalEndpoint, LocalEndpointError
from gpu_otel_agent.local.routes import Sources, build_routes
from gpu_otel_agent.model.semconv import agent_resource
from gpu_otel_agent.model.snapshot import Reading, SnapshotStore
from gpu_otel_agent.model.workload import WorkloadLookup
from gpu_otel_agent.runtime.attribution_setup import build_attribution
from gpu_otel_agent.runtime.config_watch import watch_config_file
from gpu_otel_agent.runtime.health_pipeline import HealthRuntime
from gpu_otel_agent.runtime.node_plugins import (
    RunningNodePlugin,
    open_node_plugins,
    process_events,
)
from gpu_otel_agent.runtime.reliability import reliability_readings
from gpu_otel_agent.runtime.sampler_directory import SamplerDirectory
from gpu_otel_agent.runtime.self_telemetry import SelfTelemetry
from gpu_otel_agent.sampling.sampler import DeviceSampler
from gpu_otel_agent.threads import costs
from gpu_otel_agent.threads.relay import Relay
from gpu_otel_agent.version import VERSION
from gpu_otel_agent.workloads.attribution import Attribution

if TYPE_CHECKING:
    from gpu_otel_agent.export.prometheus.server import MetricsEndpoint

log = logging.getLogger(__name__)
COSTS_MARK = "cycle costs "
TASK_STOP_SECONDS = 1.0
WATCHDOG_GRACE_SECONDS = 1.5


def _exit_if_still_running_after(seconds: float) -> None:
    """The promise is "SIGTERM exits within seconds": keep it even if a library call hangs."""

    def expire() -> None:
        log.error("shutdown took longer than %.1fs; exiting now", seconds)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def build_resource(config: AgentConfig, opened: list[OpenBackend]) -> Resource:
    """The node's resource. Driver versions are on each device's points (hw.driver_version),
    where a mixed node can say which GPU runs which driver."""
    del opened
    return agent_resource(config.node_name)


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        config_path: Path | None = None,
        overrides: Overrides | None = None,
        backends: list[Backend] | None = None,
        workloads: WorkloadLookup | None = None,
    ) -> None:
        self._initial = config
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
                new = await asyncio.to_thread(load, self._config_path, self._overrides)
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
        self._holder = ConfigHolder(self._initial)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        loop.add_signal_handler(signal.SIGUSR1, _log_costs)

        backends = self._backends if self._backends is not None else installed_backends()
        opened = await open_backends(backends, timeout=max(self._initial.call_timeout * 5, 10))
        if not opened:
            log.error(
                "no GPU backend could start on this node; nothing to monitor "
                "(without a GPU, try: gpu-agent run --simulate h100-8gpu, a simulated "
                "node: gpu-otel-agent-simulator)"
            )
            return 1
        resource = build_resource(self._initial, opened)
        workload_service = None
        self.node_plugins = open_node_plugins(
            self._initial, lambda: self.attribution,
            lambda: (s.snapshot.identity.uuid for s in self.samplers), self.store)
        if self._initial.attribution.enabled:
            self.attribution, workload_service = build_attribution(
                self._initial.attribution, process_events(self._initial, self.node_plugins))
            self.attribution.on_device_attributes(self.store.put_device_attributes)
            self.attribution.on_processes(self.store.put_processes)
        directory = SamplerDirectory()  # filled below, once the samplers exist
        if self._initial.health.enabled:
            # Attribution's lookup knows containers and pods; the backend's only PIDs. It is
            # filled by the processes group, so without that group it would name nobody.
            processes = self._initial.groups.get(PROCESS_GROUP)
            attribution = (self.attribution if processes is not None and processes.enabled
                           else None)
            self.health = HealthRuntime(self._initial, resource, opened, self.store,
                                        self._workloads or attribution, board=self.board,
                                        sampling=directory)
        observer = self.health.engine if self.health is not None else None
        relay = Relay()  # the node's devices due together read in turn (threads.relay)
        self.samplers = [
            DeviceSampler(device, self.store, self._holder, attribution=self.attribution,
                          observer=observer, relay=relay, health=self.board)
            for backend in opened
            for device in backend.devices
        ]
        directory.add(self.samplers)  # the engine's re-probe and rescan requests reach them
        tracer = build_tracer(self._initial, resource)
        exporter = build_snapshot_exporter(self._initial, resource)
        pusher = MetricPusher(
            TracedExporter(exporter, tracer) if self._initial.tracing.enabled else exporter,
            self.store, self._holder, device_count=len(self.samplers),
        )
        self.pusher = pusher
        telemetry = SelfTelemetry(time.time_ns())
        telemetry.watch_samplers(self.samplers)
        telemetry.watch_devices(device for backend in opened for device in backend.devices)
        telemetry.add(lambda: _export_readings(pusher))
        telemetry.add(reliability_readings)
        if self.health is not None:
            telemetry.add(self.health.readings)
        for node_plugin in self.node_plugins:
            telemetry.add(node_plugin.readings)
        self.store.set_agent_source(telemetry.sample)
        try:
            endpoint = self._start_endpoint(resource, telemetry, tracer)
        except EndpointError as error:
            log.error("%s", error)
            self._close_backends(opened)
            return 2
        local = self._start_local_endpoint()
        tasks = [asyncio.create_task(s.run(), name=f"sampler-{i}")
                 for i, s in enumerate(self.samplers)]
        tasks.append(asyncio.create_task(pusher.run(), name="export"))
        tasks.append(asyncio.create_task(self._watch_file(), name="config-watch"))
        if workload_service is not None:
            tasks.append(asyncio.create_task(workload_service.run(), name="workloads"))
        tasks.extend(asyncio.create_task(p.plugin.run(), name=p.name)
                     for p in self.node_plugins)
        if self.health is not None:
            tasks.extend(self.health.start())
        for task in tasks:
            task.add_done_callback(_report_crash)
        # Everything made so far (modules, libraries' tables, the backends) lives as long as
        # the agent: out of the collector's sight, a full collection walks only what cycles
        # allocate, not a few hundred thousand start-up objects each time.
        gc.freeze()
        await self._stop.wait()

        log.info("stopping")
        budget = self._holder.current.shutdown_timeout
        _exit_if_still_running_after(budget + WATCHDOG_GRACE_SECONDS)
        for task in tasks:
            task.cancel()
        _, pending = await asyncio.wait(tasks, timeout=TASK_STOP_SECONDS)
        if pending:
            log.warning("%d task(s) did not stop in time: %s", len(pending),
                        ", ".join(t.get_name() for t in pending))
        if self.health is not None:
            # Events first: they are few, and what is not sent must reach the spool.
            self.health.close(budget * 0.3)
        await pusher.close(budget * (0.7 if self.health is not None else 1.0))
        if endpoint is not None:
            endpoint.stop()
        if local is not None:
            local.stop()
        tracer.shutdown(0.5)
        for node_plugin in self.node_plugins:
            node_plugin.close()
        self._close_backends(opened)
        log.info("run summary %s", json.dumps(self.summary(), sort_keys=True))
        return 0

    def _start_endpoint(
        self, resource: Resource, telemetry: SelfTelemetry, tracer: SpanRecorder
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

    def _start_local_endpoint(self) -> LocalEndpoint | None:
        """The read-only socket of ``gpu-agent top``. It is a window onto the agent, not its
        job: when it cannot start, the agent says why and goes on sampling and exporting."""
        settings = self._initial.local_endpoint
        if not settings.enabled:
            return None
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
        except LocalEndpointError as error:
            if os.geteuid() == 0:
                log.error("local endpoint (gpu-agent top) is off: %s", error)
            else:  # a user's own run (a laptop): the default path under /run is root's
                log.warning("local endpoint (gpu-agent top) is off: %s; as a user, set "
                            "local_endpoint.socket (GPU_AGENT_LOCAL_SOCKET) to a path in a "
                            "directory of yours", error)
            return None
        return local

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


def _export_readings(pusher: MetricPusher) -> tuple[Reading, ...]:
    stats = pusher.stats
    return (
        Reading("gpu_agent.exports.completed", stats.exports),
        Reading("gpu_agent.exports.failed", stats.failures),
        Reading("gpu_agent.exports.skipped", stats.skipped),
    )


def _log_costs() -> None:
    """SIGUSR1: CPU so far per stage and per thread (the benchmark's per-cycle breakdown)."""
    log.info("%s%s", COSTS_MARK, json.dumps(
        {"stages": costs.spent(), "threads": costs.threads(), "process": costs.process()},
        sort_keys=True))


def _report_crash(task: asyncio.Task[None]) -> None:
    """A task that dies of a bug must say so: nothing else would notice a GPU go quiet."""
    if not task.cancelled() and task.exception() is not None:
        log.error("task %s stopped", task.get_name(), exc_info=task.exception())
