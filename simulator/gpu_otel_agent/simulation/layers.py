"""The simulator's layers, bottom first: a module imports only its own package and the packages
of layers below its own, never one beside it or above it (as the core's ``gpu_otel_agent.layers``;
the simulator imports the core and the plugins freely, they are below all of it).

``tests/unit/simulator/test_layers.py`` reads every module's imports and checks them against this
table, and that no packages import each other in a circle. A name here is a package or a
top-level module of ``gpu_otel_agent.simulation``.
"""

from __future__ import annotations

from typing import Final

LAYERS: Final[tuple[tuple[str, ...], ...]] = (
    # Leaves: this table, the one table of the node's operations, the C core and compiler both
    # simulated libraries share.
    ("layers", "operations", "core"),
    # Each simulated library: its C source and build, the ctypes binding of its controls, its
    # model tables and faults. Siblings: the node serves both.
    ("nvidia", "amd"),
    # Captures of real machines, read into GPUs of those libraries' models.
    ("captures",),
    # The node: daemon, scenario, control socket, state directory, MIG, cgroups, kubelet.
    ("node",),
    # A parsed ``gpu-agent sim`` command, run.
    ("sim_runner",),
    # The entry points: the ``sim`` arguments (every ``gpu-agent`` command imports them) and the
    # doc topics built from the simulator's tables.
    ("sim_commands", "doc_topic_entry"),
)


def layer_of(name: str) -> int:
    """The layer (0 = bottom) of a package or top-level module of ``gpu_otel_agent.simulation``."""
    for index, names in enumerate(LAYERS):
        if name in names:
            return index
    raise KeyError(f"{name!r} is in no layer of gpu_otel_agent.simulation.layers.LAYERS")
