"""The ``gpu-agent docs`` command: one sub-command per topic, the core's and the plugins'.

Each topic writes its page to stdout or ``--output``. A page module is imported only when its
topic is asked for, so building the command line (on every command) costs nothing but this
table and the plugins' small entry-point modules.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from gpu_otel_agent.extensions.doc_topics import DOC_TOPIC_GROUP, DocTopic
from gpu_otel_agent.extensions.loading import load_group

log = logging.getLogger(__name__)


def _metrics() -> str:
    from gpu_otel_agent.docs.metrics_doc import metrics_markdown

    return metrics_markdown()


def _events() -> str:
    from gpu_otel_agent.docs.events_doc import events_markdown

    return events_markdown()


def _config() -> str:
    from gpu_otel_agent.docs.config_doc import config_markdown

    return config_markdown()


def _dcgm_dashboard() -> str:
    from gpu_otel_agent.docs.dcgm_dashboard import dashboard_json

    return dashboard_json()


def _migration() -> str:
    from gpu_otel_agent.docs.migration_doc import migration_markdown

    return migration_markdown()


# The core's pages, each from its one table. ``cli`` (from the parser itself) and
# ``chart-schema`` (from the chart's schema file) take arguments a page does not; the command
# adds them.
PAGES: dict[str, DocTopic] = {
    "metrics": DocTopic("the metric table (docs/metrics.md)", _metrics),
    "config": DocTopic("the configuration keys (docs/config.md)", _config),
    "events": DocTopic("the health events and the XID catalog (docs/events.md)", _events),
    "migration": DocTopic("the renames of the move to the semantic conventions as published, "
                          "with their PromQL changes (docs/migration.md)", _migration),
    "dcgm-dashboard": DocTopic("the Grafana dashboard of the dcgm and dcgm-4.9 schemes "
                               "(otel-config/dashboards-dcgm/gpu-dcgm.json)", _dcgm_dashboard),
}
RESERVED = frozenset({*PAGES, "cli", "chart-schema", "dcgm-4.9-rules"})


def plugin_topics() -> dict[str, DocTopic]:
    """The installed plugins' topics by name; one whose name is taken is left out, said once."""
    topics: dict[str, DocTopic] = {}
    for entry in load_group(DOC_TOPIC_GROUP, callable_only=False):
        if entry.name in RESERVED or entry.name in topics:
            log.error("doc topic %s of a plugin left out: the name is taken", entry.name)
        elif not isinstance(entry.value, DocTopic):
            log.error("doc topic %s left out: its entry point is not a DocTopic", entry.name)
        else:
            topics[entry.name] = entry.value
    return topics


def add_docs(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             parser: argparse.ArgumentParser) -> None:
    """``gpu-agent docs <topic>``; ``parser``: the whole command line, for ``docs cli``."""
    docs = commands.add_parser("docs", help="generate reference documentation")
    topics = docs.add_subparsers(dest="docs_command", required=True)
    _add_page(topics, "metrics", PAGES["metrics"])
    _add_page(topics, "cli", DocTopic("the command-line reference (docs/cli.md)",
                                      lambda: _cli_markdown(parser)))
    _add_page(topics, "config", PAGES["config"])
    _add_chart_schema(topics)
    _add_page(topics, "events", PAGES["events"])
    _add_page(topics, "migration", PAGES["migration"])
    _add_dcgm_49_rules(topics)
    _add_page(topics, "dcgm-dashboard", PAGES["dcgm-dashboard"])
    for name, topic in plugin_topics().items():
        _add_page(topics, name, topic)


def _cli_markdown(parser: argparse.ArgumentParser) -> str:
    from gpu_otel_agent.docs.cli_doc import cli_markdown

    return cli_markdown(parser)


def _add_page(topics: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
              topic: DocTopic) -> None:
    page = topics.add_parser(name, help=topic.help)
    page.add_argument("--output", type=Path, help="write to this file instead of stdout")
    page.set_defaults(handler=lambda args: _write(topic.render(), args.output))


def _add_chart_schema(topics: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chart_schema = topics.add_parser(
        "chart-schema", help="values.schema.json with the chart values that set agent keys "
        "derived from the configuration table")
    chart_schema.add_argument("schema", type=Path, help="the chart's values.schema.json")
    chart_schema.add_argument("--output", type=Path, help="write to this file instead of stdout")

    def handler(args: argparse.Namespace) -> int:
        from gpu_otel_agent.config.chart import chart_schema_text

        return _write(chart_schema_text(args.schema.read_text(encoding="utf-8")), args.output)

    chart_schema.set_defaults(handler=handler)


def _add_dcgm_49_rules(topics: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = topics.add_parser(
        "dcgm-4.9-rules", help="the dcgm-4.9 scheme's alert rules (or their promtool tests) "
        "from the shipped ones, with dcgm-exporter 4.9's names")
    rules.add_argument("rules", type=Path, help="otel-config/alerts/gpu-alerts.rules.yaml "
                       "or gpu-alerts.test.yaml")
    rules.add_argument("--output", type=Path, help="write to this file instead of stdout")

    def handler(args: argparse.Namespace) -> int:
        from gpu_otel_agent.docs.dcgm49_rules import dcgm_49_rules

        return _write(dcgm_49_rules(args.rules.read_text(encoding="utf-8"), args.rules.name),
                      args.output)

    rules.set_defaults(handler=handler)


def _write(text: str, output: Path | None) -> int:
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
