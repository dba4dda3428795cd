"""The generated docs: each committed file equals what ``gpu-agent docs X`` writes now, every
row has a description (the generator refuses one without), and the names are checked against
sources the docs are not generated from: the telemetry contract (contract_names.py) here, the
metrics a real agent exports in tests/integration/test_docs_names.py."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_otel_agent.docs.cli_doc import cli_markdown
from gpu_otel_agent.docs.events_doc import event_rows
from gpu_otel_agent.docs.metrics_doc import metric_rows
from gpu_otel_agent.gpu_health.events import EVENTS, EventSpec
from gpu_otel_agent.gpu_health.xid import CATALOG
from gpu_otel_agent.model.metrics import (
    AGENT_METRICS,
    CUDA_METRICS,
    DEVICE_ATTRIBUTES,
    DEVICE_METRICS,
    PROCESS_METRICS,
    WORKLOAD_ATTRIBUTES,
    Instrument,
    MetricSpec,
)
from tests.unit.docs import contract_names as contract

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
DOCS = DOC.parent
ALL_METRICS = (*DEVICE_METRICS, *PROCESS_METRICS, *CUDA_METRICS, *AGENT_METRICS)


def _generated(topic: str) -> str:
    """What the installed ``gpu-agent docs TOPIC`` prints: the command users run, not the
    function behind it, so a broken command wiring fails here too."""
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "docs", topic],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("topic", ["metrics", "events", "cli", "migration", "config",
                                   "captures", "nvml-error-policy"])  # the last two: a plugin's
def test_committed_docs_equal_what_the_command_generates_now(topic: str) -> None:
    committed = (DOCS / f"{topic}.md").read_text(encoding="utf-8")
    generated = _generated(topic)
    assert committed.rstrip("\n") == generated.rstrip("\n"), (
        f"docs/{topic}.md is stale: run gpu-agent docs {topic} --output docs/{topic}.md")


def _table_rows(markdown: str) -> list[list[str]]:
    """Cells of every table body row (header and separator rows left out)."""
    rows: list[list[str]] = []
    lines = markdown.splitlines()
    for previous, line in zip(["", *lines], lines, strict=False):
        if not line.startswith("| ") or set(line) <= set("|- "):
            continue
        if previous.startswith("| "):  # the header row is the one not preceded by a row
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip() for c in cells])
    return [r for r in rows if not all(set(c) <= set("- ") for c in r)]


def _blank_descriptions(markdown: str) -> list[str]:
    return [" | ".join(row) for row in _table_rows(markdown) if not row[-1]]


@pytest.mark.parametrize("topic", ["metrics", "events", "cli", "migration"])
def test_every_row_of_the_committed_docs_has_a_description(topic: str) -> None:
    text = (DOCS / f"{topic}.md").read_text(encoding="utf-8")
    assert len(_table_rows(text)) > 10
    assert _blank_descriptions(text) == []


def test_the_row_check_finds_a_row_without_a_description() -> None:
    text = "| name | description |\n| --- | --- |\n| `a` | fine |\n| `b` |  |\n"
    assert _blank_descriptions(text) == ["`b` | "]


def test_every_catalog_entry_has_a_description() -> None:
    for spec in ALL_METRICS:
        assert spec.description.strip(), spec.name
    for spec in EVENTS:
        assert spec.description.strip(), spec.name
    for info in CATALOG.values():
        assert info.meaning.strip(), info.code
    for name, meaning in (*DEVICE_ATTRIBUTES, *WORKLOAD_ATTRIBUTES):
        assert meaning.strip(), name


def test_the_generators_refuse_an_entry_without_a_description() -> None:
    metric = MetricSpec("gpu.undocumented", Instrument.GAUGE, "1", "")
    with pytest.raises(ValueError, match=r"gpu\.undocumented has no description"):
        metric_rows((*DEVICE_METRICS, metric))
    event = EventSpec("gpu.undocumented", (), "   ")
    with pytest.raises(ValueError, match=r"gpu\.undocumented has no description"):
        event_rows((*EVENTS, event))
    parser = argparse.ArgumentParser(prog="gpu-agent")
    parser.add_argument("--documented", help="has a meaning")
    parser.add_argument("--bare")
    with pytest.raises(ValueError, match="--bare BARE of gpu-agent has no description"):
        cli_markdown(parser)


def test_every_metric_of_the_catalog_is_in_the_committed_docs() -> None:
    text = DOC.read_text(encoding="utf-8")
    documented = {row[0].strip("`") for row in _table_rows(text)}
    for spec in ALL_METRICS:
        assert spec.name in documented, spec.name


def test_every_metric_the_contract_names_is_in_the_catalog_as_promised() -> None:
    catalog = {spec.name: spec for spec in ALL_METRICS}
    for name, (instrument, unit) in contract.METRICS.items():
        assert name in catalog, f"{name} is in the telemetry contract but not in the catalog"
        spec = catalog[name]
        assert (spec.instrument.value, spec.unit) == (instrument, unit), name
    assert set(contract.DEVICE_ATTRIBUTES) <= {name for name, _ in DEVICE_ATTRIBUTES}
    assert set(contract.WORKLOAD_ATTRIBUTES) <= {name for name, _ in WORKLOAD_ATTRIBUTES}


def test_every_event_the_contract_names_is_in_the_catalog_and_the_docs() -> None:
    catalog = {spec.name: spec for spec in EVENTS}
    documented = {row[0].strip("`"): row[1]
                  for row in _table_rows((DOCS / "events.md").read_text(encoding="utf-8"))}
    for name, attributes in contract.EVENTS.items():
        assert name in catalog, f"{name} is in the telemetry contract but not in the catalog"
        assert set(attributes) <= set(catalog[name].attributes), name
        assert all(f"`{a}`" in documented[name] for a in attributes), name


def test_docs_cli_documents_the_flags_users_run_with() -> None:
    generated = (DOCS / "cli.md").read_text(encoding="utf-8")
    run = generated.split("## `gpu-agent run`", 1)[1].split("\n## ", 1)[0]
    for flag in ("--simulate SCENARIO", "--config FILE", "--interval SECONDS",
                 "--export-interval SECONDS", "--exporter otlp\\|console\\|none"):
        assert f"`{flag}`" in run


def test_every_xid_of_the_catalog_is_in_the_committed_docs() -> None:
    text = (DOCS / "events.md").read_text(encoding="utf-8")
    for info in CATALOG.values():
        assert f"| {info.code} | `{info.name}` |" in text
