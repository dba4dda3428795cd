"""The simulator's operations, one row each: what the control socket calls it, the
``gpu-agent sim`` command that sends it, the scenario timeline key that schedules it, and which
devices it applies to.

Four places read this table: ``sim_commands.py`` (the command line), ``sim_runner.py`` (a parsed
command to a control request), ``node/scenario.py`` (a timeline entry, validated) and
``node/daemon.py`` (the node's handler). Each keeps its part of an operation beside the others
of its kind, keyed by :attr:`Operation.name`; ``tests/unit/simulator/test_operations.py`` fails
when one of them misses a row or has one the table does not. Why one table: before it, one
operation lived in those four files under up to three spellings (``hang``, ``hang_ms``).

A leaf: imported by every ``gpu-agent`` command (through ``sim_commands``), so it imports
nothing of the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final


class Device(Enum):
    """Whether a request names a device."""

    REQUIRED = "required"
    OPTIONAL = "optional"  # node-wide unless a device is named
    NONE = "none"  # node-wide


@dataclass(frozen=True)
class Operation:
    name: str  # the control request's ``op`` (and a timeline event's ``action``)
    command: str | None  # ``gpu-agent sim <command>``; None: not a command of its own
    timeline: str | None  # its key in a scenario's ``timeline``; None: not schedulable
    device: Device
    vendors: frozenset[str]  # the vendors of the devices it applies to


_BOTH: Final = frozenset({"nvidia", "amd"})
_NVIDIA: Final = frozenset({"nvidia"})
_AMD: Final = frozenset({"amd"})

OPERATIONS: Final[tuple[Operation, ...]] = (
    Operation("xid", "xid", "xid", Device.REQUIRED, _NVIDIA),
    Operation("ecc", "ecc", "ecc", Device.REQUIRED, _BOTH),
    Operation("lost", "lost", "lost", Device.REQUIRED, _BOTH),
    Operation("recover", "recover", "recover", Device.REQUIRED, _BOTH),
    # The timeline's key says its unit (a bare number of milliseconds); the command's --ms does.
    Operation("hang", "hang", "hang_ms", Device.REQUIRED, _BOTH),
    Operation("set", "set", "set", Device.REQUIRED, _BOTH),
    Operation("proc_add", "proc add", "proc_add", Device.REQUIRED, _BOTH),
    Operation("proc_rm", "proc rm", "proc_rm", Device.OPTIONAL, _BOTH),
    Operation("event", "event", "event", Device.REQUIRED, _AMD),
    Operation("reset", "reset", "reset", Device.REQUIRED, _BOTH),
    Operation("recovery", "recovery", "recovery", Device.REQUIRED, _NVIDIA),
    Operation("chaos", "chaos", "chaos", Device.NONE, _NVIDIA),
    Operation("fail", "fail", "fail", Device.OPTIONAL, _NVIDIA),
    Operation("driver_reload", "driver-reload", "driver_reload", Device.NONE, _NVIDIA),
    Operation("reset_required", "reset-required", "reset_required", Device.REQUIRED, _NVIDIA),
    Operation("fabric", "fabric", "fabric", Device.REQUIRED, _NVIDIA),
    Operation("mig", "mig", None, Device.REQUIRED, _NVIDIA),
    Operation("stats", "stats", None, Device.NONE, _BOTH),
    Operation("node", "node", None, Device.NONE, _BOTH),
    Operation("info", None, None, Device.NONE, _BOTH),  # the ready line's description
)

BY_NAME: Final[Mapping[str, Operation]] = {op.name: op for op in OPERATIONS}
BY_COMMAND: Final[Mapping[str, Operation]] = {
    op.command: op for op in OPERATIONS if op.command is not None}
BY_TIMELINE_KEY: Final[Mapping[str, Operation]] = {
    op.timeline: op for op in OPERATIONS if op.timeline is not None}
