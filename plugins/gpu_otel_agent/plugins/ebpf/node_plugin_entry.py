"""The eBPF plugin's entry point (group ``gpu_otel_agent.node_plugins``, name ``ebpf``).

Loaded on every ``run``; the plugin itself (libbpf, the BPF object) is imported only when
``ebpf.enabled``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from gpu_otel_agent.backends.protocol import PROCESS_GROUP
from gpu_otel_agent.extensions.node_plugin import NodeContext, NodePlugin, NodePluginFactory

log = logging.getLogger(__name__)


def open_node_plugin(context: NodeContext) -> NodePlugin | None:
    """The plugin when ``ebpf.enabled`` and it can run here; otherwise None, said once."""
    config = context.config
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
    return open_plugin(settings, context.gpu_processes, context.publish)


_FACTORY: NodePluginFactory = open_node_plugin  # mypy checks it against the core's Protocol
