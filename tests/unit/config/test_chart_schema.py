"""The chart values that set agent keys: their schema part is derived from the table, their
defaults in values.yaml agree with it, and the real Helm engine puts each on its key."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from gpu_otel_agent.config.chart import _FROM_TABLE, CHART_VALUES, ChartValue, chart_schema_text
from gpu_otel_agent.config.load import flatten, load
from gpu_otel_agent.config.table import BY_KEY
from tests.unit.config.test_table import two_values

CHART = Path(__file__).resolve().parents[3] / "helm" / "gpu-otel-agent"
SCHEMA = CHART / "values.schema.json"


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def at(tree: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        tree = tree[part]
    return tree


def nested(path: str, value: Any) -> dict[str, Any]:
    *parents, leaf = path.split(".")
    tree: dict[str, Any] = {leaf: value}
    for part in reversed(parents):
        tree = {part: tree}
    return tree


def agent_config(chart: helm.Chart, values: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    manifests = chart.render(values=copy.deepcopy(values), name="gpu", namespace="monitoring",
                             is_install=True)
    for name, text in manifests.items():
        if name.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc and doc.get("kind") == "ConfigMap":
                path = tmp_path / "agent.yaml"
                path.write_text(doc["data"]["agent.yaml"], encoding="utf-8")
                return flatten(load(path, environ={}))
    raise AssertionError("no ConfigMap rendered")


def test_values_schema_is_the_generated_one() -> None:
    text = SCHEMA.read_text(encoding="utf-8")
    assert text == chart_schema_text(text), (
        "values.schema.json is stale: run gpu-agent docs chart-schema "
        "helm/gpu-otel-agent/values.schema.json --output helm/gpu-otel-agent/values.schema.json")


def test_values_yaml_holds_the_schema_defaults() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    for value in CHART_VALUES:
        node = schema
        for part in value.path.split("."):
            node = node["properties"][part]
        assert node["default"] == at(values, value.path) == value.default, value.path
        assert node["description"].startswith(f"agent key {value.key}: ")


@pytest.mark.parametrize("value", CHART_VALUES, ids=lambda v: v.path)
def test_each_value_lands_on_its_agent_key(
    chart: helm.Chart, value: ChartValue, tmp_path: Path,
) -> None:
    default = agent_config(chart, {}, tmp_path)
    assert default[value.key] == value.agent_value(value.default)
    if value.chart_default is _FROM_TABLE:  # the agent's default, derived from the table
        assert default[value.key] == BY_KEY[value.key].kind.check(BY_KEY[value.key].default)
    else:  # a deliberate difference says why
        assert value.why and value.chart_default != BY_KEY[value.key].default
    other = next(v for v in (*two_values(BY_KEY[value.key]), 9500)
                 if v is not None and v != value.agent_value(value.default))
    chart_value = 9500 if value.path == "prometheus.port" else other
    values = nested(value.path, chart_value)
    if value.path == "ebpf.processEvents":
        values["ebpf"]["enabled"] = True  # the chart refuses ebpf events without the plugin
    assert agent_config(chart, values, tmp_path)[value.key] == value.agent_value(chart_value)
