"""docs/architecture.md stays true to the tree: its layer table is ``gpu_otel_agent.layers``, and
every module or folder it names (on the two routes and elsewhere) exists where it says."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.layers import LAYERS
from gpu_otel_agent.simulation.layers import LAYERS as SIMULATOR_LAYERS

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "architecture.md"
CORE = REPO / "agent" / "gpu_otel_agent"
# How the page abbreviates the two other trees.
PREFIXES = {"plugins/.../": REPO / "plugins" / "gpu_otel_agent" / "plugins",
            "simulator/.../simulation/": REPO / "simulator" / "gpu_otel_agent" / "simulation"}
TREES = (CORE, *PREFIXES.values())


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


SIMULATOR_TABLE = "| layer | simulator packages |"


def _table(section: str) -> list[tuple[str, ...]]:
    rows = re.findall(r"^\| (\d+) \| (.+?) \|", section, re.MULTILINE)
    assert [int(number) for number, _ in rows] == list(range(len(rows)))
    return [tuple(name.rstrip("/") for name in re.findall(r"`([^`]+)`", cells))
            for _, cells in rows]


def test_the_layer_table_is_the_layers_module() -> None:
    section = _page().split("## Layers", 1)[1].split("\n## ", 1)[0]
    assert _table(section.split(SIMULATOR_TABLE, 1)[0]) == [tuple(names) for names in LAYERS]


def test_the_simulator_layer_table_is_its_layers_module() -> None:
    section = _page().split(SIMULATOR_TABLE, 1)[1].split("\n## ", 1)[0]
    assert _table(section) == [tuple(names) for names in SIMULATOR_LAYERS]


def _exists(name: str) -> bool:
    for prefix, root in PREFIXES.items():
        if name.startswith(prefix):
            return (root / name.removeprefix(prefix)).exists()
    if "/" not in name.rstrip("/"):  # a top-level folder, or a file named beside its folder
        return (REPO / name).exists() or any(any(tree.rglob(name.rstrip("/"))) for tree in TREES)
    return (CORE / name).exists() or (REPO / name).exists()


def test_every_module_and_folder_the_page_names_exists() -> None:
    names = {token for token in re.findall(r"`([^`\s]+)`", _page())
             if token.endswith((".py", "/")) and not token.startswith(("gpu_otel_agent.", "http"))}
    assert len(names) > 40  # the routes name their files
    missing = sorted(name for name in names if not _exists(name))
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
