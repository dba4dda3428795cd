"""The simulated node behind ``gpu-agent run --simulate SCENARIO``.

The factory brings a simulated node up from a scenario file and attaches this process's GPU
libraries to it for as long as its context is entered; the backends then find simulated GPUs
as they would real ones.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from gpu_otel_agent.extensions.loading import load_group

SIMULATED_NODE_GROUP = "gpu_otel_agent.simulated_nodes"
log = logging.getLogger(__name__)


class SimulatedNodeError(Exception):
    """The scenario is invalid or the node could not be built; printed, exit code 2."""


class SimulatedNodeFactory(Protocol):
    def __call__(self, scenario: Path, /) -> AbstractContextManager[object]:
        """Raises SimulatedNodeError (on entry or here) when the node cannot come up."""


@contextlib.contextmanager
def simulated_node(scenario: Path | None) -> Iterator[None]:
    """The first installed simulated node up from ``scenario`` while entered (None: none)."""
    if scenario is None:
        yield
        return
    factories = load_group(SIMULATED_NODE_GROUP)
    if not factories:
        raise SimulatedNodeError(
            f"none is installed (entry-point group {SIMULATED_NODE_GROUP})")
    if len(factories) > 1:
        log.info("simulated nodes %s are installed; using %s",
                 ", ".join(f.name for f in factories), factories[0].name)
    with factories[0].value(scenario):
        yield
