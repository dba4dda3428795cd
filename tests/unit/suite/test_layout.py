"""The unit tests are laid out like the code they test: ``tests/unit/<name>/`` tests the core's
package (or top-level module) ``<name>``, a plugin of that name, or the simulator; the few
folders that test no one package (rules over the whole repository, the deployment files, the
harness) are named here with why. A new folder named after a feature rather than a package
fails this test."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.layers import LAYERS

UNIT = Path(__file__).resolve().parents[1]
PLUGINS = Path(__file__).resolve().parents[3] / "plugins" / "gpu_otel_agent" / "plugins"

# Folders that test something other than one package, and what.
ACROSS = {
    "architecture": "rules over every module: the layer tables, the plugin boundary",
    "deploy": "the Helm chart, collector configurations, dashboards and alert rules",
    "packaging": "the built wheels and the licence",
    "semconv": "the OpenTelemetry hardware names, against the conventions' own registry",
    "memory": "the agent's memory per process, across attribution and export",
    "simulator": "the simulated node (gpu_otel_agent.simulation, the other distribution)",
    "receivers": "the OTLP receivers the integration tests assert on",
    "cuda_standin": "the CUDA stand-in the eBPF tests trace",
    "bench": "the benchmark runner",
    "suite": "the suite's own policies: skips, the harness marker, this layout",
}


def test_every_unit_folder_is_a_package_a_plugin_or_named_here() -> None:
    packages = {name for layer in LAYERS for name in layer}
    plugins = {path.name for path in PLUGINS.iterdir() if (path / "__init__.py").exists()}
    folders = {path.name for path in UNIT.iterdir()
               if path.is_dir() and (path / "__init__.py").exists()}
    assert len(folders) > 10, "the scan found too few folders to be looking at tests/unit"
    assert sorted(folders - packages - plugins - set(ACROSS)) == []


def test_every_folder_named_here_exists() -> None:
    assert sorted(name for name in ACROSS if not (UNIT / name).is_dir()) == []
