"""The core (``agent/``) never imports a plugin, and no production module (core or plugin)
imports the simulated node (``gpu_otel_agent.simulation``, the gpu-otel-agent-simulator
distribution, absent from a GPU node): both come in through entry points only.

Every module under agent/ is parsed (not grepped: a comment or a docstring naming a plugin is
fine, an import in any form is not): ``import``, ``from ... import`` (relative ones resolved
against the module's package) and ``importlib.import_module`` / ``__import__`` with a literal
name.
"""

from __future__ import annotations

import pytest

from tests.unit.architecture.imports import core_modules, imported_names, plugin_modules

PLUGINS = "gpu_otel_agent.plugins"
SIMULATION = "gpu_otel_agent.simulation"


def _is_plugin(name: str) -> bool:
    return name == PLUGINS or name.startswith(PLUGINS + ".")


def plugin_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    return sorted({n for n in imported_names(source, module, is_package) if _is_plugin(n)})


def _is_simulation(name: str) -> bool:
    return name == SIMULATION or name.startswith(SIMULATION + ".")


def simulation_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    return sorted({n for n in imported_names(source, module, is_package) if _is_simulation(n)})


def test_no_core_module_imports_a_plugin() -> None:
    modules = core_modules()
    assert len(modules) > 50, "the scan found too few core modules to be looking at agent/"
    offenders = {
        module.where: found
        for module in modules
        if (found := plugin_imports(module.path.read_text(encoding="utf-8"), module.name,
                                    module.is_package))
    }
    assert offenders == {}


def test_no_production_module_imports_the_simulated_node() -> None:
    """A GPU node installs the agent alone: an import of the simulation package anywhere in
    the core or a plugin would fail there (or drag the simulator into the production wheel)."""
    plugins = plugin_modules()
    assert len(plugins) > 50, "the scan found too few plugin modules to be looking at plugins/"
    offenders = {
        module.where: found
        for module in [*core_modules(), *plugins]
        if (found := simulation_imports(module.path.read_text(encoding="utf-8"), module.name,
                                        module.is_package))
    }
    assert offenders == {}


@pytest.mark.parametrize(("source", "module"), [
    ("from gpu_otel_agent.simulation.captures.registry import write_whole",
     "gpu_otel_agent.plugins.nvidia.capture.writer"),
    ("from gpu_otel_agent.simulation.nvidia import nvml_returns", "gpu_otel_agent.plugins.x"),
    ("from gpu_otel_agent import simulation", "gpu_otel_agent.plugins.amd.capture"),
    ("from ...simulation import node", "gpu_otel_agent.plugins.nvidia.backend"),
    ("importlib.import_module('gpu_otel_agent.simulation.captures.registry')",
     "gpu_otel_agent.plugins.amd.capture"),
])
def test_the_scan_sees_every_import_of_the_simulation(source: str, module: str) -> None:
    assert simulation_imports(source, module)


@pytest.mark.parametrize(("source", "module"), [
    ("import gpu_otel_agent.plugins.ebpf.plugin", "gpu_otel_agent.runtime.x"),
    ("from gpu_otel_agent.plugins.nvidia import simulator", "gpu_otel_agent.cli"),
    ("from gpu_otel_agent import plugins", "gpu_otel_agent.cli"),
    ("from .. import plugins", "gpu_otel_agent.runtime.agent"),
    ("from ..plugins.kubernetes import podresources", "gpu_otel_agent.runtime.attribution_setup"),
    ("def f():\n    from gpu_otel_agent.plugins.ebpf import plugin", "gpu_otel_agent.a"),
    ("if TYPE_CHECKING:\n    import gpu_otel_agent.plugins as p", "gpu_otel_agent.a"),
    ("importlib.import_module('gpu_otel_agent.plugins.amd')", "gpu_otel_agent.a"),
    ("__import__('gpu_otel_agent.plugins')", "gpu_otel_agent.a"),
])
def test_the_scan_sees_every_form_of_import(source: str, module: str) -> None:
    assert plugin_imports(source, module)


@pytest.mark.parametrize(("source", "module"), [
    ('"""Uses gpu_otel_agent.plugins.ebpf through an entry point."""', "gpu_otel_agent.a"),
    ("# from gpu_otel_agent.plugins import ebpf", "gpu_otel_agent.a"),
    ("from gpu_otel_agent.plugins_registry import x", "gpu_otel_agent.a"),
    ("from . import plugins", "gpu_otel_agent.runtime.agent"),  # gpu_otel_agent.runtime.plugins
    ("GROUP = 'gpu_otel_agent.plugins'", "gpu_otel_agent.a"),
])
def test_the_scan_leaves_mentions_alone(source: str, module: str) -> None:
    assert plugin_imports(source, module) == []
