"""The simulated node behind ``gpu-agent run --simulate SCENARIO``.

The factory brings a simulated node up from a scenario file and attaches this process's GPU
libraries to it for as long as its context is entered; the backends then find simulated GPUs
as they would real ones. It comes from another distribution (gpu-otel-agent-simulator, which
also adds the ``sim`` command group): a GPU node installs the agent alone, and there
``--simulate`` and ``gpu-agent sim`` say in one line what to install.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from gpu_otel_agent.extensions.loading import load_group

SIMULATED_NODE_GROUP = "gpu_otel_agent.simulated_nodes"
# The command groups the simulator's distribution adds, named so that asking for one without
# it gets the same hint rather than argparse's list of choices.
SIMULATION_COMMANDS = ("sim",)
NOT_INSTALLED = ("not installed: it comes with gpu-otel-agent-simulator "
                 "(from a clone of gpu-otel-agent: pip install ./simulator)")
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
        raise SimulatedNodeError(NOT_INSTALLED)
    if len(factories) > 1:
        log.info("simulated nodes %s are installed; using %s",
                 ", ".join(f.name for f in factories), factories[0].name)
    with factories[0].value(scenario):
        yield


def require_simulated_node() -> None:
    """SimulatedNodeError (saying what to install) unless a simulated node is installed; for
    commands that start one in a child process, which would otherwise fail out of sight."""
    if not entry_points(group=SIMULATED_NODE_GROUP):
        raise SimulatedNodeError(NOT_INSTALLED)
