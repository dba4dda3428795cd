"""Documentation topics: a plugin adds its own page to ``gpu-agent docs <topic>``.

The entry point's name is the topic, its object a :class:`DocTopic`. The group is loaded on
every command (the ``docs`` parser lists every topic, and ``docs cli`` documents them), so the
entry point's module should hold only the topic and import what renders the page inside
``render``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DOC_TOPIC_GROUP = "gpu_otel_agent.doc_topics"


@dataclass(frozen=True)
class DocTopic:
    help: str  # one line, for ``gpu-agent docs --help`` and docs/cli.md
    render: Callable[[], str]  # the page, as Markdown
