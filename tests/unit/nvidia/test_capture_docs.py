"""docs/captures.md is generated from the capture field table; every row says what it is."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.plugins.nvidia.capture import fields
from gpu_otel_agent.simulation.captures import docs
from gpu_otel_agent.simulation.captures.nvidia_smi import limits

PAGE = Path(__file__).resolve().parents[3] / "docs" / "captures.md"


def test_the_committed_page_is_what_the_table_generates() -> None:
    assert PAGE.read_text(encoding="utf-8") == docs.render(), (
        "docs/captures.md is stale: run python -m gpu_otel_agent.simulation.captures.docs "
        "--output docs/captures.md")


def test_every_row_of_the_page_has_a_description() -> None:
    for f in fields.FIELDS:
        assert f.description.strip(), f"capture field {f.key} has no description"
    for what, why in limits.RULES:
        assert what.strip() and why.strip()
    for d in limits.DIVERGENCES:
        assert d.reason.strip(), d
    page = docs.render()
    for f in fields.FIELDS:
        assert f"`{f.key}`" in page
