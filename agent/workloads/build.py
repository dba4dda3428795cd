"""Builds the workload resolver and its service from the configuration."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from gpu_otel_agent.config.schema import AttributionConfig
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


def build(config: AttributionConfig, process_events: ProcessEventsFactory = netlink_events,
          ) -> tuple[Attribution, WorkloadService]:
    proc_root = Path(config.proc_root)
    report_namespaces(proc_root)
    resolver = WorkloadResolver(
        ProcReader(proc_root, frozenset({MPS_LIMIT_ENV})),
        command_line=config.export_command_line,
        memory_resources=dict(config.memory_resources),
    )
    attribution = Attribution(resolver, AttributionSettings(
        max_process_series=config.max_process_series,
        command_line=config.export_command_line))
    pods: PodSource | None = None
    if config.kubelet.socket:
        from gpu_otel_agent.plugins.kubernetes.podresources import PodResourcesClient

        pods = PodResourcesClient(Path(config.kubelet.socket), config.kubelet.timeout)
    service = WorkloadService(resolver, ServiceSettings(
        cgroup_root=Path(config.cgroup_root),
        reconcile_interval=config.reconcile_interval,
        refresh_interval=config.kubelet.refresh_interval,
    ), pods, process_events)
    return attribution, service
