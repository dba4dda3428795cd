"""The simulator's imports point down its own layer table (``simulation/layers.py``) and no
packages of it import each other in a circle; an import of the core or a plugin is always down.

A failure names the file, the line and what it imports: move the shared part down (or up to
the layer that joins both sides), do not move the table to fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpu_otel_agent.simulation.layers import LAYERS, layer_of
from tests.unit.architecture.imports import REPO, Module, imports, modules
from tests.unit.architecture.test_layers import circles
from tests.unit.architecture.test_layers import climbing as core_climbing

SIM = "gpu_otel_agent.simulation"
ROOT = REPO / "simulator" / "gpu_otel_agent" / "simulation"


def room(name: str) -> str | None:
    """The simulator package or top-level module ``name`` is in (None: outside it)."""
    parts = name.split(".")
    if ".".join(parts[:2]) != SIM or len(parts) < 3:
        return None
    return parts[2]


def _imports(module: Module) -> Iterable[tuple[str, int]]:
    return imports(module.path.read_text(encoding="utf-8"), module.package)


def climbing(found: Iterable[Module]) -> list[str]:
    return core_climbing(found, room, layer_of)


def graph(found: Iterable[Module]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module in found:
        own = room(module.name)
        for name, _ in _imports(module):
            target = room(name)
            if own is not None and target is not None and target != own:
                edges.setdefault(own, set()).add(target)
    return edges


def test_every_simulator_package_has_a_layer() -> None:
    rooms = {room(module.name) for module in modules(ROOT, SIM)} - {None}
    listed = {name for layer in LAYERS for name in layer}
    assert sorted(rooms - listed) == []
    assert sorted(listed - rooms) == []


def test_no_simulator_module_imports_beside_or_above_its_layer() -> None:
    found = modules(ROOT, SIM)
    assert len(found) > 30, "the scan found too few modules to be looking at the simulator"
    assert climbing(found) == []


def test_no_simulator_packages_import_each_other_in_a_circle() -> None:
    assert circles(graph(modules(ROOT, SIM))) == []


def test_a_climbing_import_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text("from gpu_otel_agent.simulation.node.scenario import Value\n"
                    "from gpu_otel_agent.model import readings\n"
                    "from ..core import tables\n", encoding="utf-8")
    found = climbing([Module(path, "gpu_otel_agent.simulation.nvidia.x")])
    assert [line.rpartition(" -> ")[2] for line in found] == ["node"]
