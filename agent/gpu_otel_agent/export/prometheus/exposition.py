"""Metric families and the Prometheus text exposition format (version 0.0.4).

Families are built fresh from a snapshot on every scrape (the client_python ``Collector``
idea): a series exists exactly while the snapshot has a reading for it, so a gone process or
GPU vanishes from the next scrape without bookkeeping.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    name: str
    type: str  # "gauge" or "counter"
    help: str
    samples: dict[Labels, float | int] = field(default_factory=dict)

    def add(self, labels: Labels, value: float | int) -> None:
        # Prometheus fails the whole scrape on a duplicate series: keep the first, say so.
        if labels in self.samples:
            warn_once(f"duplicate series {self.name}{render_labels(labels)} dropped")
            return
        self.samples[labels] = value


class Families:
    """Families by name, in insertion order; a name reused with another type is refused."""

    def __init__(self) -> None:
        self._by_name: dict[str, Family] = {}

    def family(self, name: str, type_: str, help_: str) -> Family | None:
        existing = self._by_name.get(name)
        if existing is None:
            existing = Family(name, type_, help_)
            self._by_name[name] = existing
        elif existing.type != type_:
            warn_once(f"{name} is both a {existing.type} and a {type_}; the {type_} is dropped")
            return None
        return existing

    def __iter__(self) -> Iterator[Family]:
        return iter(self._by_name.values())

    def get(self, name: str) -> Family | None:
        return self._by_name.get(name)


_warned: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned and len(_warned) < 1000:
        _warned.add(message)
        log.warning("prometheus endpoint: %s", message)


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@lru_cache(maxsize=20_000)
def render_labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape_label_value(v)}"' for k, v in labels)
    return "{" + inner + "}"


def format_value(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def sample_lines(family: Family) -> Iterator[str]:
    """The family's sample lines; text 0.0.4 and OpenMetrics write them alike."""
    return (f"{family.name}{render_labels(labels)} {format_value(value)}"
            for labels, value in family.samples.items())


def render(families: Families) -> bytes:
    lines: list[str] = []
    for family in families:
        if not family.samples:
            continue
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {family.name} {help_text}")
        lines.append(f"# TYPE {family.name} {family.type}")
        lines.extend(sample_lines(family))
    lines.append("")
    return "\n".join(lines).encode("utf-8")
