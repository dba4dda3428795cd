"""The simulated node behind ``gpu-agent run --simulate SCENARIO``.

The factory brings a simulated node up from a scenario file and attaches this process's GPU
libraries to it for as long as its context is entered; the backends then find simulated GPUs
as they would real ones.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

SIMULATED_NODE_GROUP = "gpu_otel_agent.simulated_nodes"


class SimulatedNodeError(Exception):
    """The scenario is invalid or the node could not be built; printed, exit code 2."""


class SimulatedNodeFactory(Protocol):
    def __call__(self, scenario: Path, /) -> AbstractContextManager[object]:
        """Raises SimulatedNodeError (on entry or here) when the node cannot come up."""
