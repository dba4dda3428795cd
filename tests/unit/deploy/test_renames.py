"""The rename table against what ships: no dashboard, rule, adapter rule or collector config
may still use a name the table retired (docs/migration.md is generated from the same table)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_otel_agent.export.prometheus.naming import metric_name
from gpu_otel_agent.model.metrics import (
    AGENT_METRICS,
    CUDA_METRICS,
    DEVICE_METRICS,
    PROCESS_METRICS,
)
from gpu_otel_agent.model.renames import RENAMES

REPO = Path(__file__).resolve().parents[3]
SHIPPED = sorted(p for d in ("otel-config", "helm") for p in (REPO / d).rglob("*")
                 if p.is_file() and p.suffix in (".json", ".yaml", ".yml", ".tpl", ".txt"))
SPECS = (*DEVICE_METRICS, *PROCESS_METRICS, *CUDA_METRICS, *AGENT_METRICS)
CURRENT_OTEL = {s.name for s in SPECS}
CURRENT_PROMETHEUS = {metric_name(s) for s in SPECS}
RETIRED_PROMETHEUS = sorted({r.old_prometheus for r in RENAMES} - CURRENT_PROMETHEUS)
RETIRED_OTEL = sorted({r.old for r in RENAMES if "{" not in r.old} - CURRENT_OTEL)


def test_the_table_names_current_metrics_only() -> None:
    for rename in RENAMES:
        assert rename.new in CURRENT_OTEL, rename.new
    assert "gpu_fan_speed_ratio" in RETIRED_PROMETHEUS  # the check below has work to do
    assert "gpu.pcie.link.width.max" in RETIRED_OTEL


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_no_shipped_file_uses_a_retired_name(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    left = [n for n in RETIRED_PROMETHEUS if re.search(rf"\b{re.escape(n)}\b", text)]
    left += [n for n in RETIRED_OTEL
             if re.search(rf"(?<![\w.]){re.escape(n)}(?!\w|\.[\w*])", text)]
    assert left == [], f"{path.name} still uses {left}: see docs/migration.md"
