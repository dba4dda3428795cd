"""The core (``agent/``) never imports a plugin: plugins come in through entry points only.

Every module under agent/ is parsed (not grepped: a comment or a docstring naming a plugin is
fine, an import in any form is not): ``import``, ``from ... import`` (relative ones resolved
against the module's package) and ``importlib.import_module`` / ``__import__`` with a literal
name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CORE = REPO / "agent" / "gpu_otel_agent"
CORE_PACKAGE = "gpu_otel_agent"
PLUGINS = "gpu_otel_agent.plugins"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CORE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([CORE_PACKAGE, *parts])


def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if node.level == 0:
        return node.module or ""
    base = package.split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _literal_import(node: ast.Call) -> str | None:
    func = node.func
    name = (func.attr if isinstance(func, ast.Attribute)
            else func.id if isinstance(func, ast.Name) else None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imported_names(source: str, module: str, is_package: bool = False) -> Iterator[str]:
    """Every module name ``source`` imports (for ``from a import b``: ``a`` and ``a.b``)."""
    package = _package_of(module, is_package)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and (name := _literal_import(node)) is not None:
            yield name


def _is_plugin(name: str) -> bool:
    return name == PLUGINS or name.startswith(PLUGINS + ".")


def plugin_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    return sorted({n for n in imported_names(source, module, is_package) if _is_plugin(n)})


def test_no_core_module_imports_a_plugin() -> None:
    modules = sorted(CORE.rglob("*.py"))
    assert len(modules) > 50, "the scan found too few core modules to be looking at agent/"
    offenders = {
        str(path.relative_to(REPO)): found
        for path in modules
        if (found := plugin_imports(path.read_text(encoding="utf-8"), _module_name(path),
                                    path.name == "__init__.py"))
    }
    assert offenders == {}


@pytest.mark.parametrize(("source", "module"), [
    ("import gpu_otel_agent.plugins.ebpf.plugin", "gpu_otel_agent.runtime.x"),
    ("from gpu_otel_agent.plugins.nvidia import simulator", "gpu_otel_agent.cli"),
    ("from gpu_otel_agent import plugins", "gpu_otel_agent.cli"),
    ("from .. import plugins", "gpu_otel_agent.runtime.agent"),
    ("from ..plugins.kubernetes import podresources", "gpu_otel_agent.workloads.build"),
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
