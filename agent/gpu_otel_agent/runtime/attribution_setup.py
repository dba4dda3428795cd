"""Builds attribution (the workload resolver) and the workload service from the configuration
and the installed workload sources: the assembly of the ``workloads`` package with its plugins,
so it lives with the rest of the assembly (``workloads`` stays below the plugin doors).

Who devices are allocated to comes from a workload source plugin (entry-point group
``gpu_otel_agent.workload_sources``: the kubelet's pod-resources API); none is needed for
processes and containers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.config.schema import AttributionConfig
from gpu_otel_agent.extensions.loading import LoadedEntry, load_group
from gpu_otel_agent.extensions.workloads import WORKLOAD_SOURCE_GROUP
from gpu_otel_agent.model.snapshot import SnapshotStore
from gpu_otel_agent.workloads.attribution import Attribution, AttributionSettings
from gpu_otel_agent.workloads.lifecycle import ProcessEventsFactory, netlink_events
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import MPS_LIMIT_ENV, WorkloadResolver
from gpu_otel_agent.workloads.service import PodSource, ServiceSettings, WorkloadService

log = logging.getLogger(__name__)


def report_namespaces(proc_root: Path) -> None:
    """Say once, at start, when the agent cannot see the host's cgroups or processes."""
    try:
        own = os.stat(proc_root / "self" / "ns" / "cgroup").st_ino
        init = os.stat(proc_root / "1" / "ns" / "cgroup").st_ino
    except OSError:
        return
    if own != init:
        log.warning(
            "the agent runs in a private cgroup namespace: cgroup paths of GPU processes are "
            "read relative to it; run with the host cgroup namespace (hostPID and "
            "cgroupns=host, or a read-only host /sys/fs/cgroup) for full attribution")


def pod_source(config: AttributionConfig, factories: Iterable[LoadedEntry] | None = None,
               ) -> PodSource | None:
    """The first installed workload source (by name) that is configured, if any."""
    offered: list[tuple[str, PodSource]] = []
    entries = load_group(WORKLOAD_SOURCE_GROUP) if factories is None else factories
    for entry in entries:
        try:
            source = entry.value(config)
        except Exception as error:  # a source's bug must not stop attribution
            log.error("workload source %s failed to start, left out: %s: %s",
                      entry.name, type(error).__name__, error, exc_info=error)
            continue
        if source is not None:
            offered.append((entry.name, source))
    if len(offered) > 1:
        # The service asks one source; two configured ones would disagree about allocations.
        log.warning("workload sources %s are all configured; using %s",
                    ", ".join(name for name, _ in offered), offered[0][0])
        for _, extra in offered[1:]:
            extra.close()
    return offered[0][1] if offered else None


def build_attribution(config: AttributionConfig,
                      process_events: ProcessEventsFactory = netlink_events,
                      ) -> tuple[Attribution, WorkloadService]:
    """Attribution and the service that keeps it current (both phases at once)."""
    parts = attribution_parts(config)
    return parts.attribution, workload_service(config, parts.resolver, process_events)


@dataclass(frozen=True)
class AttributionParts:
    attribution: Attribution
    resolver: WorkloadResolver  # what the workload service keeps current


def attribution_parts(config: AttributionConfig, store: SnapshotStore | None = None,
                      ) -> AttributionParts:
    """Who a process belongs to: complete without the process event source (a node plugin
    may give it, and node plugins read attribution); it publishes into ``store``."""
    proc_root = Path(config.proc_root)
    report_namespaces(proc_root)
    resolver = WorkloadResolver(
        ProcReader(proc_root, frozenset({MPS_LIMIT_ENV})),
        command_line=config.export_command_line,
        memory_resources=dict(config.memory_resources),
    )
    attribution = Attribution(resolver, AttributionSettings(
        max_process_series=config.max_process_series,
        command_line=config.export_command_line),
        put_processes=store.put_processes if store is not None else None,
        publish_attributes=store.put_device_attributes if store is not None else None)
    return AttributionParts(attribution, resolver)


def workload_service(config: AttributionConfig, resolver: WorkloadResolver,
                     process_events: ProcessEventsFactory = netlink_events,
                     ) -> WorkloadService:
    """Keeps ``resolver`` current: cgroups, the pod source, process exec/exit."""
    return WorkloadService(resolver, ServiceSettings(
        cgroup_root=Path(config.cgroup_root),
        reconcile_interval=config.reconcile_interval,
        refresh_interval=config.kubelet.refresh_interval,
    ), pod_source(config), process_events)
