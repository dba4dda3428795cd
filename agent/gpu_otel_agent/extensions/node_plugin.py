"""Node-level plugins: things that watch the node as a whole rather than one GPU (eBPF).

Every installed factory is offered the running configuration once at start; it returns its
plugin, or None when it is not configured or cannot run here (having said why, once). The
plugin publishes node-level samples under its entry-point name and may also be the source of
process exec/exit events that ``attribution.process_events`` names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.model.snapshot import AgentSample, Reading
from gpu_otel_agent.model.workload import GpuProcess
from gpu_otel_agent.workloads.lifecycle import ProcessCallbacks, ProcessEvents

NODE_PLUGIN_GROUP = "gpu_otel_agent.node_plugins"


@dataclass(frozen=True)
class NodeContext:
    """What the core gives a node plugin."""

    config: AgentConfig  # the configuration at start (node plugins are not reloaded)
    # Every process on any GPU now; asked each cycle, because attribution is built after the
    # node plugins (its resolver may take process events from one of them).
    gpu_processes: Callable[[], Mapping[int, GpuProcess]]
    # Replaces this plugin's node-level samples in every following snapshot.
    publish: Callable[[tuple[AgentSample, ...]], None]


class NodePlugin(Protocol):
    async def run(self) -> None:
        """Runs on the agent's event loop until cancelled."""

    def readings(self) -> tuple[Reading, ...]:
        """The plugin's own self-telemetry (``gpu_agent.*``), read with every snapshot."""

    def close(self) -> None:
        """Releases what the plugin holds; called once, after ``run`` was cancelled."""


@runtime_checkable
class ProcessEventSource(Protocol):
    """A node plugin that can also feed the workload resolver process exec/exit events."""

    def process_events(self, callbacks: ProcessCallbacks) -> ProcessEvents: ...


class NodePluginFactory(Protocol):
    def __call__(self, context: NodeContext, /) -> NodePlugin | None: ...
