"""The Grafana dashboards, statically (their PromQL runs against a real Prometheus in
tests/integration/test_prometheus_scrape.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpu_otel_agent.gpu_health.events import EVENTS

REPO = Path(__file__).resolve().parents[3]
DASHBOARDS = sorted((REPO / "otel-config" / "dashboards").glob("*.json"))


def test_four_dashboards_with_unique_uids_and_well_formed_panels() -> None:
    boards = [json.loads(p.read_text(encoding="utf-8")) for p in DASHBOARDS]
    assert len(boards) == 4
    assert len({b["uid"] for b in boards}) == 4
    for board in boards:
        variables = {v["name"] for v in board["templating"]["list"]}
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), board["title"]
        for panel in board["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
            for target in panel.get("targets", []):
                uid = target["datasource"]["uid"]
                assert uid.startswith("${") and uid[2:-1] in variables, (board["title"], uid)


def test_the_events_dashboard_reads_the_agents_events_from_loki() -> None:
    board = json.loads((REPO / "otel-config" / "dashboards" / "gpu-health-events.json")
                       .read_text(encoding="utf-8"))
    targets = [t for p in board["panels"] for t in p.get("targets", [])]
    assert targets and all(t["datasource"]["type"] == "loki" for t in targets)
    for target in targets:
        assert '{service_name="gpu-otel-agent"}' in target["expr"]
        assert "event_name" in target["expr"]  # the attribute event.name, as Loki stores it
    (event,) = [v for v in board["templating"]["list"] if v["name"] == "event"]
    assert event["query"].split(",") == [spec.name for spec in EVENTS]  # the agent's list


def test_no_legend_names_a_gpu_by_its_index_alone() -> None:
    """gpu_index is the vendor's own index: on a mixed node an NVIDIA and an AMD GPU are both
    0, so a legend that names a GPU also names something unique (its bus id or hw_id)."""
    ambiguous = [(p.name, panel["title"], target["legendFormat"])
                 for p in DASHBOARDS
                 for panel in json.loads(p.read_text(encoding="utf-8"))["panels"]
                 for target in panel.get("targets", [])
                 if "{{gpu_index}}" in target.get("legendFormat", "")
                 and "{{gpu_pci_bus_id}}" not in target["legendFormat"]
                 and "{{hw_id}}" not in target["legendFormat"]]
    assert ambiguous == []


def test_the_loki_metric_panels_count_events_not_records() -> None:
    """An event that hit two processes is two records sharing gpu.event.id (docs/events.md):
    a metric panel counts distinct gpu_event_id, grouped as the panel shows them."""
    board = json.loads((REPO / "otel-config" / "dashboards" / "gpu-health-events.json")
                       .read_text(encoding="utf-8"))
    metric = [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])
              if "count_over_time" in t["expr"]]
    assert len(metric) == 2
    for title, expr in metric:
        match = re.fullmatch(r"count by \(([^)]*)\) \(sum by \(([^)]*)\) \(count_over_time\("
                             r"(.*)\)\)\)", expr)
        assert match is not None, title
        outer = [s.strip() for s in match.group(1).split(",")]
        inner = [s.strip() for s in match.group(2).split(",")]
        assert inner == [*outer, "gpu_event_id"], title
