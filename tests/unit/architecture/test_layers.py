"""Imports point down: every module of the core imports only its own package and packages of
lower layers (``gpu_otel_agent.layers``), a plugin only the core's layers up to
``PLUGIN_CEILING``, and no packages import each other in a circle.

A failure names the file, the line and what it imports: move the shared part down to a layer
both sides may import (or up to the one that wires them), do not move the table to fit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

from gpu_otel_agent.layers import EXPORT_WINGS, LAYERS, PLUGIN_CEILING, layer_of, wing_of
from tests.unit.architecture.imports import Module, core_modules, imports, plugin_modules

CORE = "gpu_otel_agent"
PLUGINS = "gpu_otel_agent.plugins"


def room(name: str) -> str | None:
    """The core package or top-level module ``name`` is in (None: outside the core)."""
    parts = name.split(".")
    if parts[0] != CORE or len(parts) < 2 or parts[1] == "plugins":
        return None
    return parts[1]


def plugin(name: str) -> str | None:
    """The plugin (``gpu_otel_agent.plugins.<name>``) ``name`` is in."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and ".".join(parts[:2]) == PLUGINS else None


def _imports(module: Module) -> Iterable[tuple[str, int]]:
    return imports(module.path.read_text(encoding="utf-8"), module.package)


def climbing(modules: Iterable[Module], room_of: Callable[[str], str | None] = room,
             floor_of: Callable[[str], int] = layer_of) -> list[str]:
    """``file:line -> package`` for every import of a package not below the importer's:
    ``room_of`` names the package (or wing) a module is in (None: outside the table),
    ``floor_of`` its floor (the core's layers by default)."""
    out = set()
    for module in modules:
        own = room_of(module.name)
        if own is None:
            continue  # gpu_otel_agent/__init__.py
        for name, line in _imports(module):
            target = room_of(name)
            if target is not None and target != own and floor_of(target) >= floor_of(own):
                out.add(f"{module.where}:{line} -> {target}")
    return sorted(out)


def above_the_ceiling(modules: Iterable[Module]) -> list[str]:
    ceiling = layer_of(PLUGIN_CEILING)
    out = set()
    for module in modules:
        for name, line in _imports(module):
            target = room(name)
            if target is not None and layer_of(target) > ceiling:
                out.add(f"{module.where}:{line} -> {target}")
    return sorted(out)


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(graph.get(node, ())):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def plugin_to_plugin(modules: Iterable[Module]) -> list[str]:
    """``file:line -> plugin`` for every import of another plugin's module: plugins reach each
    other only through an entry point (the core's doors), never by name."""
    out = set()
    for module in modules:
        own = plugin(module.name)
        for name, line in _imports(module):
            other = plugin(name)
            if other is not None and other != own:
                out.add(f"{module.where}:{line} -> plugins.{other}")
    return sorted(out)


def package_graph(modules: Iterable[Module]) -> dict[str, set[str]]:
    """Which packages import which: the core's by their top-level name, each plugin as one."""
    graph: dict[str, set[str]] = {}
    for module in modules:
        own = room(module.name) or f"plugins.{plugin(module.name)}"
        for name, _ in _imports(module):
            target = room(name) or (f"plugins.{p}" if (p := plugin(name)) else None)
            if target is not None and target != own:
                graph.setdefault(own, set()).add(target)
    return graph


EXPORT = "gpu_otel_agent.export"


def wing(name: str) -> str | None:
    """The wing of ``export`` (``otlp``, ``metrics``, ...) ``name`` is in; a module directly in
    ``export/`` is a wing of its own (so the table must name it)."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and ".".join(parts[:2]) == EXPORT else None


def export_modules() -> list[Module]:
    return [m for m in core_modules() if wing(m.name) is not None]


def climbing_wings(modules: Iterable[Module]) -> list[str]:
    """``file:line -> wing`` for every import of a wing of ``export`` not below the importer's."""
    return climbing(modules, wing, wing_of)


def module_graph(modules: Iterable[Module]) -> dict[str, set[str]]:
    """Which modules import which, among ``modules``."""
    names = {m.name for m in modules}
    graph: dict[str, set[str]] = {}
    for module in modules:
        for name, _ in _imports(module):
            if name in names and name != module.name:
                graph.setdefault(module.name, set()).add(name)
    return graph


def test_every_export_wing_is_in_the_table() -> None:
    found = {wing(m.name) for m in export_modules()} - {None}
    listed = {name for floor in EXPORT_WINGS for name in floor}
    assert sorted(found ^ listed) == []


def test_no_export_module_imports_a_wing_beside_or_above_its_own() -> None:
    modules = export_modules()
    assert len(modules) > 30, "the scan found too few modules to be looking at export/"
    assert climbing_wings(modules) == []


def test_the_events_depend_on_the_transport_only() -> None:
    wings = {wing(name) for m in export_modules() if wing(m.name) == "events"
             for name, _ in _imports(m)} - {None}
    assert wings <= {"events", "otlp"}


def test_no_modules_of_export_or_the_simulator_import_each_other_in_a_circle() -> None:
    from tests.unit.architecture.imports import REPO, modules

    simulator = modules(REPO / "simulator" / "gpu_otel_agent" / "simulation",
                        "gpu_otel_agent.simulation")
    assert circles(module_graph(export_modules())) == []
    assert circles(module_graph(simulator)) == []


def test_a_climbing_wing_and_a_module_circle_are_seen(tmp_path: Path) -> None:
    source = "from gpu_otel_agent.export.metrics.series import series\n"
    found = climbing_wings([_module(tmp_path, "gpu_otel_agent.export.events.x", source)])
    assert [line.rpartition(" -> ")[2] for line in found] == ["metrics"]
    a = _module(tmp_path, "gpu_otel_agent.export.otlp.a", "from . import b\n")
    b = _module(tmp_path, "gpu_otel_agent.export.otlp.b", "import gpu_otel_agent.export.otlp.a\n")
    assert circles(module_graph([a, b])) == [["gpu_otel_agent.export.otlp.a",
                                              "gpu_otel_agent.export.otlp.b"]]


def test_every_core_package_has_a_layer() -> None:
    rooms = {room(module.name) for module in core_modules()} - {None}
    listed = {name for layer in LAYERS for name in layer}
    assert sorted(rooms - listed) == []
    assert sorted(listed - rooms) == []  # a stale name in the table


def test_no_core_module_imports_beside_or_above_its_layer() -> None:
    modules = core_modules()
    assert len(modules) > 50, "the scan found too few core modules to be looking at agent/"
    assert climbing(modules) == []


def test_plugins_import_only_the_layers_they_plug_into() -> None:
    modules = plugin_modules()
    assert len(modules) > 20, "the scan found too few plugin modules"
    assert above_the_ceiling(modules) == []


def test_no_plugin_imports_another() -> None:
    assert plugin_to_plugin(plugin_modules()) == []


def test_no_packages_import_each_other_in_a_circle() -> None:
    assert circles(package_graph([*core_modules(), *plugin_modules()])) == []


# The checks themselves, on made-up modules: each must see what it is for.

def _module(tmp_path: Path, name: str, source: str) -> Module:
    path = tmp_path / (name.replace(".", "_") + ".py")
    path.write_text(source, encoding="utf-8")
    return Module(path, name)


@pytest.mark.parametrize(("module", "source", "culprit"), [
    ("gpu_otel_agent.export.x", "from gpu_otel_agent.runtime.agent import X", "runtime"),
    ("gpu_otel_agent.gpu_health.delivery",  # a sibling
     "from gpu_otel_agent.sampling.sampler import DeviceSampler", "sampling"),
    ("gpu_otel_agent.model.renames",
     "def f():\n    from ..export.prometheus import naming", "export"),
    ("gpu_otel_agent.workloads.x", "import gpu_otel_agent.extensions.loading", "extensions"),
    ("gpu_otel_agent.config", "from gpu_otel_agent import threads", "threads"),  # __init__
])
def test_a_climbing_import_is_seen(tmp_path: Path, module: str, source: str,
                                   culprit: str) -> None:
    found = climbing([_module(tmp_path, module, source)])
    assert [line.rpartition(" -> ")[2] for line in found] == [culprit]


@pytest.mark.parametrize(("module", "source"), [
    ("gpu_otel_agent.runtime.agent", "from gpu_otel_agent.export.metrics.pusher import P"),
    ("gpu_otel_agent.export.metrics.pusher", "from gpu_otel_agent.export.otlp.retry import R"),
    ("gpu_otel_agent.sampling.sampler", "from . import relay"),
    ("gpu_otel_agent.cli", '"""Runs gpu_otel_agent.runtime.agent."""'),
    ("gpu_otel_agent.model.x", "import json"),
])
def test_a_downward_import_passes(tmp_path: Path, module: str, source: str) -> None:
    assert climbing([_module(tmp_path, module, source)]) == []


def test_a_plugin_above_the_ceiling_is_seen(tmp_path: Path) -> None:
    source = "from gpu_otel_agent.export.x import P\nfrom gpu_otel_agent.model import m\n"
    found = above_the_ceiling([_module(tmp_path, "gpu_otel_agent.plugins.kubernetes.x", source)])
    assert [line.rpartition(" -> ")[2] for line in found] == ["export"]


def test_a_plugin_importing_another_is_seen(tmp_path: Path) -> None:
    source = ("from gpu_otel_agent.extensions.capture import write_whole\n"
              "from gpu_otel_agent.plugins.nvidia import readings\n"
              "from . import device\n")
    found = plugin_to_plugin([_module(tmp_path, "gpu_otel_agent.plugins.amd.x", source)])
    assert [line.rpartition(" -> ")[2] for line in found] == ["plugins.nvidia"]


def test_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
