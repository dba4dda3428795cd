"""The simulated node behind ``gpu-agent run --simulate SCENARIO``.

The factory brings a simulated node up from a scenario file and attaches this process's GPU
libraries to it for as long as its context is entered; the backends then find simulated GPUs
as they would real ones. It comes from another distribution (gpu-otel-agent-simulator, which
also adds the ``sim`` command group): a GPU node installs the agent alone, and there
``--simulate`` and ``gpu-agent sim`` say in one line what to install.

A simulated run writes nothing where a real agent keeps its state: its event spool and local
socket move from the production paths (``/var/lib/gpu-otel-agent``, ``/run/gpu-otel-agent``)
into the simulated node's own directory, removed with the node. A fake XID spooled there can
never be re-sent by the node's real agent, and a real agent's socket is never taken.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.config.table import default
from gpu_otel_agent.distributions import entry_points_of
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


class RunningSimulatedNode(Protocol):
    @property
    def state_dir(self) -> Path:
        """The node's private directory (0700), removed when the node stops."""


class SimulatedNodeFactory(Protocol):
    def __call__(self, scenario: Path, /) -> AbstractContextManager[RunningSimulatedNode]:
        """Raises SimulatedNodeError (on entry or here) when the node cannot come up."""


# Where a node's real agent keeps its state: the directories of the table's defaults.
PRODUCTION_DIRS = tuple(Path(default(key)).parent
                        for key in ("health.spool_path", "local_endpoint.socket"))


def _production(path: str) -> bool:
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(d.resolve()) or resolved == d.resolve()
               for d in PRODUCTION_DIRS)


@dataclass(frozen=True)
class RunPaths:
    """Where this run writes its state. ``directory`` is the simulated node's directory for the
    agent (None: not a simulated run, the configuration is used as it is)."""

    directory: Path | None = None

    def apply(self, config: AgentConfig) -> AgentConfig:
        """``config`` with every production path (spool, local socket) moved to
        ``directory``; paths set elsewhere (a test's, ``top``'s private socket) are kept."""
        if self.directory is None:
            return config
        health, local = config.health, config.local_endpoint
        if health.spool_path is not None and _production(health.spool_path):
            health = dataclasses.replace(health, spool_path=str(self.directory / "events"))
        if _production(local.socket):
            local = dataclasses.replace(local, socket=str(self.directory / "agent.sock"))
        return dataclasses.replace(config, health=health, local_endpoint=local)


@contextlib.contextmanager
def simulated_node(scenario: Path | None) -> Iterator[RunPaths]:
    """The first installed simulated node up from ``scenario`` while entered (None: none);
    yields where the run keeps its state (apply it to every configuration loaded)."""
    if scenario is None:
        yield RunPaths()
        return
    factories = load_group(SIMULATED_NODE_GROUP)
    if not factories:
        raise SimulatedNodeError(NOT_INSTALLED)
    if len(factories) > 1:
        log.info("simulated nodes %s are installed; using %s",
                 ", ".join(f.name for f in factories), factories[0].name)
    with factories[0].value(scenario) as node:
        directory = node.state_dir / "agent"
        directory.mkdir(mode=0o700, exist_ok=True)
        yield RunPaths(directory)


def require_simulated_node() -> None:
    """SimulatedNodeError (saying what to install) unless a simulated node is installed; for
    commands that start one in a child process, which would otherwise fail out of sight."""
    if not entry_points_of(SIMULATED_NODE_GROUP):
        raise SimulatedNodeError(NOT_INSTALLED)
