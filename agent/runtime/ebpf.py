"""Starts the eBPF plugin when configured, and gives it the GPU processes attribution found."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpu_otel_agent.backends.protocol import PROCESS_GROUP
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.model.snapshot import SnapshotStore
from gpu_otel_agent.model.workload import GpuProcess, WorkloadLookup
from gpu_otel_agent.workloads.lifecycle import ProcessEventsFactory, netlink_events

if TYPE_CHECKING:
    from gpu_otel_agent.plugins.ebpf.plugin import EbpfPlugin

log = logging.getLogger(__name__)
NODE_SOURCE = "ebpf"


def gpu_processes(lookup: WorkloadLookup | None, uuids: Iterable[str],
                  ) -> Mapping[int, GpuProcess]:
    """Every process on any GPU, once (a process on two GPUs is one process)."""
    if lookup is None:
        return {}
    return {p.pid: p for uuid in uuids for p in lookup.processes_on(uuid)}


def open_ebpf(config: AgentConfig, lookup: Callable[[], WorkloadLookup | None],
              uuids: Callable[[], Iterable[str]], store: SnapshotStore) -> EbpfPlugin | None:
    """The plugin when ``ebpf.enabled`` and it can run here; otherwise None, said once.
    ``lookup`` and ``uuids`` are asked each cycle: attribution is built after the plugin (its
    resolver may take process events from it)."""
    if not config.ebpf.enabled:
        return None
    processes = config.groups.get(PROCESS_GROUP)
    if not config.attribution.enabled or processes is None or not processes.enabled:
        log.warning("eBPF plugin off: it traces the GPU processes that attribution finds; "
                    "enable attribution and the %s group", PROCESS_GROUP)
        return None
    from gpu_otel_agent.plugins.ebpf.plugin import EbpfSettings, open_plugin

    settings = EbpfSettings(interval=config.ebpf.interval,
                            max_allocations=config.ebpf.max_allocations,
                            workload_retention=config.ebpf.workload_retention,
                            proc_root=Path(config.attribution.proc_root),
                            max_process_series=config.ebpf.max_process_series)
    if config.ebpf.object_path is not None:
        settings = dataclasses.replace(settings, object_path=Path(config.ebpf.object_path))
    return open_plugin(settings, lambda: gpu_processes(lookup(), uuids()),
                       lambda samples: store.put_node_samples(NODE_SOURCE, samples))


def process_events(config: AgentConfig, plugin: EbpfPlugin | None) -> ProcessEventsFactory:
    """Where the workload resolver takes process exec/exit from."""
    if config.attribution.process_events != "ebpf":
        return netlink_events
    if plugin is None:
        log.warning("attribution.process_events is ebpf but the eBPF plugin is off; "
                    "taking process events from netlink")
        return netlink_events
    return plugin.process_events
