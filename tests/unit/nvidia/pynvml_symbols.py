"""The pynvml names the NVIDIA plugin needs, read from its source (one list, never typed by hand).

Every ``pynvml.NAME`` in ``gpu_otel_agent/plugins/nvidia`` (the simulator aside: it is not the
agent) and every ``getattr(pynvml, "NAME")`` without a default is required; ``getattr(pynvml,
"NAME", default)`` is an optional name with a fallback. Names built at run time are the error
policy's rows (``error_policy.CODES``). ``python -m tests.unit.nvidia.pynvml_symbols DIR...``
prints, for each unpacked nvidia-ml-py release, the required names its ``pynvml.py`` lacks: how the
floor in ``pyproject.toml`` was chosen.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[3] / "plugins/gpu_otel_agent/plugins/nvidia"


def _names_in(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "pynvml"):
            names.add(node.attr)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "getattr" and len(node.args) == 2
              and isinstance(node.args[0], ast.Name) and node.args[0].id == "pynvml"):
            arg = node.args[1]
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                continue  # a name built at run time: listed by its module (see required())
            names.add(arg.value)
    return names


def sources() -> list[Path]:
    return sorted(p for p in PLUGIN.rglob("*.py") if "simulator" not in p.parts)


def required() -> frozenset[str]:
    """Every pynvml name the plugin uses without a fallback."""
    from gpu_otel_agent.plugins.nvidia.error_policy import CODES

    names: set[str] = {row.name for row in CODES}
    for path in sources():
        names |= _names_in(ast.parse(path.read_text(), str(path)))
    return frozenset(names)


def defined(pynvml_py: Path) -> frozenset[str]:
    """The names a pynvml.py defines at module level (without importing it)."""
    names: set[str] = set()
    statements = list(ast.parse(pynvml_py.read_text(), str(pynvml_py)).body)
    while statements:  # module level, into if/try blocks, not into functions
        node = statements.pop()
        if isinstance(node, ast.If | ast.Try):
            statements.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.ExceptHandler):
            statements.extend(node.body)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def main(argv: list[str]) -> int:
    need = required()
    for directory in argv:
        lacking = sorted(need - defined(Path(directory) / "pynvml.py"))
        print(f"{directory}: {len(lacking)} lacking {' '.join(lacking)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
