"""The ``dcgm-4.9`` scheme's deploy files: its alert rules (and their promtool tests) are the
shipped ones generated through the rename table, valid and passing; the chart ships and picks
them when the scheme is chosen; its Prometheus Adapter rules name only 4.9's fields."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.docs.dcgm49_rules import RULES, RULES_49, dcgm_49_rules
from gpu_otel_agent.docs.dcgm_dashboard import dashboard_json, exact, panel_rows
from gpu_otel_agent.model.dcgm_names import RENAMES_49
from tests.unit.deploy.kube_discovery import install_manifests

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "otel-config" / "alerts"
CHART = REPO / "helm" / "gpu-otel-agent"
ADAPTER_49 = REPO / "helm" / "examples" / "prometheus-adapter-values-dcgm-4.9.yaml"
TESTS, TESTS_49 = "gpu-alerts.test.yaml", "gpu-alerts-dcgm-4.9.test.yaml"


@pytest.mark.parametrize(("source", "generated"), [(RULES, RULES_49), (TESTS, TESTS_49)])
def test_the_dcgm_49_rules_are_generated_from_the_shipped_ones(source: str,
                                                                generated: str) -> None:
    expected = dcgm_49_rules((ALERTS / source).read_text(encoding="utf-8"), source)
    assert (ALERTS / generated).read_text(encoding="utf-8") == expected, (
        f"{generated} is stale: run gpu-agent docs dcgm-4.9-rules {source} --output {generated}"
        " in otel-config/alerts")
    text = (ALERTS / generated).read_text(encoding="utf-8")
    for row in RENAMES_49:
        assert not re.search(rf"\b{row.old}\b", text), row.old


def test_the_generator_refuses_a_field_whose_unit_changed() -> None:
    rules = "expr: DCGM_FI_DEV_FB_USED > 70000\n"
    with pytest.raises(ValueError, match=r"DCGM_FI_DEV_FB_USED.*MiB -> By"):
        dcgm_49_rules(rules)
    assert "DCGM_FI_DEV_GPU_TEMP_CELSIUS > 87" in dcgm_49_rules("expr: DCGM_FI_DEV_GPU_TEMP > 87")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed (apt-get install prometheus; .ci/run does)")
    return subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=ALERTS,
                          timeout=60, check=False)


def test_the_dcgm_49_rules_are_valid_and_their_unit_tests_pass() -> None:
    checked = _promtool("check", "rules", RULES_49)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _promtool("test", "rules", TESTS_49)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_chart_ships_the_generated_file() -> None:
    assert (CHART / "files" / RULES_49).read_bytes() == (ALERTS / RULES_49).read_bytes()


def _rule_spec(scheme: str) -> Any:
    """The PrometheusRule the chart makes on a cluster with the Prometheus Operator's CRDs
    (only there: kube_discovery serves the discovery that says so)."""
    values = {"prometheus": {"scheme": scheme}, "prometheusRule": {"enabled": True}}
    (rule,) = [d for d in install_manifests(CHART, values) if d["kind"] == "PrometheusRule"]
    return rule["spec"]


@pytest.mark.parametrize(("scheme", "rules"), [("dcgm-4.9", RULES_49), ("dcgm", RULES),
                                                ("otel", RULES)])
def test_the_chart_installs_the_rules_of_its_scheme(scheme: str, rules: str) -> None:
    shipped = yaml.safe_load((ALERTS / rules).read_text(encoding="utf-8"))
    assert _rule_spec(scheme) == shipped


def test_the_dcgm_49_adapter_rules_name_only_4_9_fields() -> None:
    rules = yaml.safe_load(ADAPTER_49.read_text(encoding="utf-8"))["rules"]["custom"]
    queries = " ".join(r["seriesQuery"] + r["metricsQuery"] for r in rules)
    for row in RENAMES_49:
        assert not re.search(rf"\b{row.old}\b", queries), row.old
    series = {r["seriesQuery"].split("{", 1)[0] for r in rules}
    assert {"DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_FB_USED_BYTES"} <= series


DASHBOARD = REPO / "otel-config" / "dashboards-dcgm" / "gpu-dcgm.json"


def test_the_dcgm_dashboard_is_generated_from_the_table() -> None:
    assert DASHBOARD.read_text(encoding="utf-8") == dashboard_json(), (
        "gpu-dcgm.json is stale: run gpu-agent docs dcgm-dashboard "
        "--output otel-config/dashboards-dcgm/gpu-dcgm.json")
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
    # One panel per renamed field the agent serves, reading either scheme.
    assert len(queries) == len(panel_rows()) >= 15
    for row, query in zip(panel_rows(), queries, strict=True):
        assert row.new in query and row.old in query
        if row.unit_changed and row.unit_before != "mJ":
            assert query.endswith(f"* {exact(row.factor)}") and float(exact(row.factor)) == \
                row.factor
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)
    assert all(p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
               for p in board["panels"])
