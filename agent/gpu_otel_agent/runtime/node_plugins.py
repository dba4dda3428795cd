"""Starts the installed node-level plugins (entry points) and picks the process event source.

Which plugins exist is not known here: every factory of the ``gpu_otel_agent.node_plugins``
group is offered the configuration and decides itself whether it runs (the eBPF plugin:
``ebpf.enabled``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.extensions.loading import LoadedEntry, load_group
from gpu_otel_agent.extensions.node_plugin import (
    NODE_PLUGIN_GROUP,
    NodeContext,
    NodePlugin,
    ProcessEventSource,
)
from gpu_otel_agent.model.snapshot import Reading, SnapshotStore
from gpu_otel_agent.model.workload import GpuProcess, WorkloadLookup
from gpu_otel_agent.workloads.lifecycle import ProcessEventsFactory, netlink_events

log = logging.getLogger(__name__)
NETLINK = "netlink"  # the built-in process event source; any other name is a node plugin's


@dataclass(frozen=True)
class RunningNodePlugin:
    """A started plugin as the core calls it: its bugs are reported, never passed on.

    ``readings`` is read with every snapshot, so an exception there would fail every export
    and scrape; ``close`` runs in the shutdown sequence, so one there would skip the rest.
    """

    name: str  # its entry-point name: also the source name of its samples in the snapshot
    plugin: NodePlugin
    _failed_readings: set[str] = field(default_factory=set, compare=False, repr=False)

    def readings(self) -> tuple[Reading, ...]:
        try:
            return self.plugin.readings()
        except Exception as error:  # reported once; its self-telemetry is left out meanwhile
            kind = type(error).__name__
            if kind not in self._failed_readings:
                self._failed_readings.add(kind)
                log.error("node plugin %s: readings failed, left out of the snapshot: %s: %s",
                          self.name, kind, error, exc_info=error)
            return ()

    def close(self) -> None:
        try:
            self.plugin.close()
        except Exception as error:
            log.error("node plugin %s failed to close: %s: %s", self.name,
                      type(error).__name__, error, exc_info=error)


def gpu_processes(lookup: WorkloadLookup | None, uuids: Iterable[str],
                  ) -> Mapping[int, GpuProcess]:
    """Every process on any GPU, once (a process on two GPUs is one process)."""
    if lookup is None:
        return {}
    return {p.pid: p for uuid in uuids for p in lookup.processes_on(uuid)}


def open_node_plugins(config: AgentConfig, lookup: Callable[[], WorkloadLookup | None],
                      uuids: Callable[[], Iterable[str]], store: SnapshotStore,
                      factories: Iterable[LoadedEntry] | None = None,
                      ) -> list[RunningNodePlugin]:
    """The node plugins that run here. ``lookup`` and ``uuids`` are asked each cycle."""
    running: list[RunningNodePlugin] = []
    entries = load_group(NODE_PLUGIN_GROUP) if factories is None else factories
    for entry in entries:
        context = NodeContext(config, lambda: gpu_processes(lookup(), uuids()),
                              functools.partial(store.put_node_samples, entry.name))
        try:
            plugin = entry.value(context)
        except Exception as error:  # a plugin's bug must not stop the GPU metrics
            log.error("node plugin %s failed to start, left out: %s: %s",
                      entry.name, type(error).__name__, error, exc_info=error)
            continue
        if plugin is not None:
            running.append(RunningNodePlugin(entry.name, plugin))
    return running


def process_events(config: AgentConfig, plugins: Iterable[RunningNodePlugin],
                   ) -> ProcessEventsFactory:
    """Where the workload resolver takes process exec/exit from."""
    source = config.attribution.process_events
    if source == NETLINK:
        return netlink_events
    plugin = next((p.plugin for p in plugins if p.name == source), None)
    if plugin is None:
        log.warning("attribution.process_events is %s but the %s plugin is off; "
                    "taking process events from netlink", source, source)
        return netlink_events
    if not isinstance(plugin, ProcessEventSource):
        log.warning("attribution.process_events is %s but that plugin gives no process "
                    "events; taking them from netlink", source)
        return netlink_events
    return plugin.process_events
