"""Which exposition format and content encoding a scraper asked for (RFC 9110 negotiation).

Prometheus asks for OpenMetrics first and accepts gzip; its ``Accept`` header (2.x, and 3.x
without native histograms) reads::

    application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,
    text/plain;version=0.0.4;q=0.5,*/*;q=0.1

A media range matches by its most specific form (``type/subtype;version=...`` over
``type/subtype`` over ``type/*`` over ``*/*``); a range naming another ``version`` does not
match. The agent serves OpenMetrics 1.0.0 only when the client prefers it strictly: on a tie
(a browser's ``*/*``, curl without a header) the plain text format wins, which a person can read.
Malformed parts of a header are ignored, as a header the agent cannot read at all means text.

Why not ``prometheus_client.exposition.choose_encoder`` and ``gzip_accepted``, when that
library writes the page: they ignore ``q``. ``choose_encoder`` serves OpenMetrics whenever the
header names it, even at ``q=0`` or below a text format the scraper prefers (Prometheus with
``scrape_protocols: [PrometheusText0.0.4, OpenMetricsText1.0.0]``); ``gzip_accepted`` gzips for
``gzip;q=0`` and not for ``*``. tests/unit/export/prometheus/test_negotiation.py pins each case.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass


class Format(enum.Enum):
    TEXT = "text/plain; version=0.0.4; charset=utf-8"
    OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

    @property
    def content_type(self) -> str:
        return self.value


@dataclass(frozen=True)
class MediaRange:
    type: str
    subtype: str
    version: str | None
    q: float


def _parameters(parts: list[str]) -> Iterator[tuple[str, str]]:
    for part in parts:
        name, sep, value = part.partition("=")
        if sep:
            yield name.strip().lower(), value.strip().strip('"')


def _quality(text: str | None) -> float | None:
    if text is None:
        return 1.0
    try:
        q = float(text)
    except ValueError:
        return None
    return q if 0.0 <= q <= 1.0 else None


def parse_accept(header: str) -> tuple[MediaRange, ...]:
    ranges = []
    for item in header.split(","):
        media, *rest = item.split(";")
        kind, sep, subtype = media.strip().lower().partition("/")
        if not sep or not kind or not subtype:
            continue
        params = dict(_parameters(rest))
        q = _quality(params.get("q"))
        if q is not None:
            ranges.append(MediaRange(kind, subtype, params.get("version"), q))
    return tuple(ranges)


def _q_for(ranges: tuple[MediaRange, ...], kind: str, subtype: str, version: str) -> float:
    best, best_rank = 0.0, -1
    for r in ranges:
        if r.type == kind and r.subtype == subtype:
            if r.version is not None and r.version != version:
                continue
            rank = 3 if r.version is not None else 2
        elif r.type == kind and r.subtype == "*":
            rank = 1
        elif r.type == "*" and r.subtype == "*":
            rank = 0
        else:
            continue
        if rank > best_rank:
            best, best_rank = r.q, rank
    return best


def choose_format(accept: str | None) -> Format:
    if not accept:
        return Format.TEXT
    ranges = parse_accept(accept)
    openmetrics = _q_for(ranges, "application", "openmetrics-text", "1.0.0")
    text = _q_for(ranges, "text", "plain", "0.0.4")
    return Format.OPENMETRICS if openmetrics > text else Format.TEXT


def accepts_gzip(accept_encoding: str | None) -> bool:
    """``gzip`` (or ``x-gzip``) listed with q > 0, or ``*`` with q > 0 and gzip not listed."""
    if not accept_encoding:
        return False
    explicit: float | None = None
    wildcard = 0.0
    for item in accept_encoding.split(","):
        coding, *rest = item.split(";")
        q = _quality(dict(_parameters(rest)).get("q"))
        if q is None:
            continue
        name = coding.strip().lower()
        if name in ("gzip", "x-gzip"):
            explicit = max(explicit or 0.0, q)
        elif name == "*":
            wildcard = q
    return (explicit if explicit is not None else wildcard) > 0
