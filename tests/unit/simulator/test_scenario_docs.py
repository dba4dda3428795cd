"""docs/simulator.md is complete enough to write a scenario: it names every reading a device
entry, a timeline ``set`` and ``gpu-agent sim set`` accept, and every model with its own data."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.simulation.amd import models as amd_models
from gpu_otel_agent.simulation.amd import scenario as amd_scenario
from gpu_otel_agent.simulation.node import scenario
from gpu_otel_agent.simulation.nvidia import models

PAGE = Path(__file__).resolve().parents[3] / "docs" / "simulator.md"
PER_LINK = re.compile(r"^nvlink_(state|crc_flit_errors|replay_errors|recovery_errors)_\d+$")


def _section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(title)
    return text[start:text.index("\n#", start)]


def test_every_reading_is_listed() -> None:
    listed = set(re.findall(r"`([a-z0-9_]+)`", _section("### Readings")))
    nvidia = {r for r in scenario.settable_readings() if not PER_LINK.match(r)}
    assert nvidia - listed == set()
    assert set(amd_scenario.settable_readings()) - listed == set()
    assert any(PER_LINK.match(r) for r in scenario.settable_readings())  # named by pattern


def test_every_model_is_listed() -> None:
    text = _section("## Scenario file")
    missing = [m for m in (*models.MODELS, *amd_models.MODELS) if f"`{m}`" not in text]
    assert not missing
