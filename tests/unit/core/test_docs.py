from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.docs import metrics_markdown
from gpu_otel_agent.model.metrics import DEVICE_METRICS

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_docs_metrics_is_generated_from_the_catalog() -> None:
    assert DOC.read_text(encoding="utf-8") == metrics_markdown(), (
        "docs/metrics.md is stale: run gpu-agent docs metrics --output docs/metrics.md"
    )


def test_every_metric_is_documented() -> None:
    text = metrics_markdown()
    for spec in DEVICE_METRICS:
        assert f"`{spec.name}`" in text


def test_docs_cli_is_generated_from_the_parser() -> None:
    from gpu_otel_agent.cli import build_parser
    from gpu_otel_agent.docs import cli_markdown

    generated = cli_markdown(build_parser())
    assert (DOC.parent / "cli.md").read_text(encoding="utf-8") == generated, (
        "docs/cli.md is stale: run gpu-agent docs cli --output docs/cli.md"
    )
    for flag in ("--simulate SCENARIO", "--config FILE", "--interval SECONDS",
                 "--export-interval SECONDS", "--exporter otlp\\|console"):
        assert f"`{flag}`" in generated


def test_docs_events_is_generated_from_the_event_and_xid_catalogs() -> None:
    from gpu_otel_agent.docs import events_markdown
    from gpu_otel_agent.gpu_health.events import EVENTS
    from gpu_otel_agent.gpu_health.xid import CATALOG

    generated = events_markdown()
    assert (DOC.parent / "events.md").read_text(encoding="utf-8") == generated, (
        "docs/events.md is stale: run gpu-agent docs events --output docs/events.md"
    )
    for spec in EVENTS:
        assert f"| `{spec.name}` |" in generated
    for info in CATALOG.values():
        assert f"| {info.code} | `{info.name}` |" in generated
