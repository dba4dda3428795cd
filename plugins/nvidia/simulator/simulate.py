"""The simulated node behind ``gpu-agent run --simulate`` (group
``gpu_otel_agent.simulated_nodes``, name ``nvidia``; it serves the scenario's AMD GPUs too)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from gpu_otel_agent.extensions.simulation import SimulatedNodeError, SimulatedNodeFactory
from gpu_otel_agent.plugins.nvidia.simulator import (
    BuildError,
    ScenarioError,
    SimulatedNode,
    attach_in_process,
)

log = logging.getLogger(__name__)


@contextlib.contextmanager
def simulated_node(scenario: Path) -> Iterator[SimulatedNode]:
    """Starts the node daemon and attaches this process's NVML (and amdsmi) to it."""
    try:
        node = SimulatedNode.start(scenario)
    except (ScenarioError, BuildError) as error:
        raise SimulatedNodeError(str(error)) from error
    with node:
        attach_in_process(node)
        log.info("simulated node up: control socket %s", node.socket_path)
        yield node


_FACTORY: SimulatedNodeFactory = simulated_node  # mypy checks it against the core's Protocol
