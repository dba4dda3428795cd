"""Reads the imports of the project's modules by parsing them (not grepping: a comment or a
docstring naming a module is not an import; an import in a function or under
``TYPE_CHECKING`` is).

Forms seen: ``import``, ``from ... import`` (relative ones resolved against the module's
package) and ``importlib.import_module`` / ``__import__`` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CORE = REPO / "agent" / "gpu_otel_agent"
PLUGINS = REPO / "plugins" / "gpu_otel_agent" / "plugins"


@dataclass(frozen=True)
class Module:
    path: Path
    name: str  # its dotted import name

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def package(self) -> str:
        """The package the module is in (a package's ``__init__``: the package itself)."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @property
    def where(self) -> str:
        """Its path in the repository (a module made up by a test: its name)."""
        return (str(self.path.relative_to(REPO)) if self.path.is_relative_to(REPO)
                else self.name)


def modules(root: Path, package: str) -> list[Module]:
    """Every module under ``root``, the directory of the import package ``package``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(Module(path, ".".join([package, *parts])))
    return found


def core_modules() -> list[Module]:
    return [m for m in modules(CORE, "gpu_otel_agent")
            if not m.name.startswith("gpu_otel_agent.plugins")]


def plugin_modules() -> list[Module]:
    return modules(PLUGINS, "gpu_otel_agent.plugins")


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


def imports(source: str, package: str) -> Iterator[tuple[str, int]]:
    """Every module name ``source`` imports, with its line (for ``from a import b``: ``a`` and
    ``a.b``, since ``b`` may be a module). ``package``: the package the source's module is in."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            yield base, node.lineno
            yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names)
        elif isinstance(node, ast.Call) and (name := _literal_import(node)) is not None:
            yield name, node.lineno


def imported_names(source: str, module: str, is_package: bool = False) -> Iterator[str]:
    """The names alone, for a module named ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    return (name for name, _ in imports(source, package))
