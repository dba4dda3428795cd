"""Accept / Accept-Encoding negotiation, with the headers real scrapers send."""

from __future__ import annotations

import pytest

from gpu_otel_agent.export.prometheus.negotiation import Format, accepts_gzip, choose_format

# What Prometheus 2.42 (the version the integration tests run) sends; captured there too.
PROMETHEUS_2 = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
# Prometheus 3's default scrape_protocols (OpenMetrics 1.0.0 first, text 1.0.0 and 0.0.4 last).
PROMETHEUS_3 = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                "application/openmetrics-text;version=0.0.1;q=0.4,"
                "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,"
                "text/plain;version=0.0.4;q=0.2,*/*;q=0.1")
# scrape_protocols: [PrometheusText0.0.4] only.
TEXT_ONLY = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(("accept", "expected"), [
    (PROMETHEUS_2, Format.OPENMETRICS),
    (PROMETHEUS_3, Format.OPENMETRICS),
    ("application/openmetrics-text", Format.OPENMETRICS),
    ("application/*", Format.OPENMETRICS),
    (TEXT_ONLY, Format.TEXT),
    (BROWSER, Format.TEXT),  # a tie through */*: the readable one
    (None, Format.TEXT),
    ("", Format.TEXT),
    ("*/*", Format.TEXT),
    ("application/openmetrics-text;version=0.0.1", Format.TEXT),  # only a draft we don't serve
    ("application/openmetrics-text;version=1.0.0;q=0,*/*", Format.TEXT),
    ("application/openmetrics-text;q=0.9,text/plain;q=0.95", Format.TEXT),
    ("garbage;;;,application/openmetrics-text;q=nope,application/openmetrics-text;q=0.3",
     Format.OPENMETRICS),
])
def test_format_follows_the_preference(accept: str | None, expected: Format) -> None:
    assert choose_format(accept) is expected


@pytest.mark.parametrize(("header", "expected"), [
    ("gzip", True),  # Prometheus
    ("gzip, deflate, br", True),
    ("x-gzip", True),
    ("*", True),
    ("identity", False),
    ("gzip;q=0", False),
    ("*;q=0.5, gzip;q=0", False),
    ("deflate, *;q=0", False),
    (None, False),
    ("", False),
])
def test_gzip_only_when_allowed(header: str | None, expected: bool) -> None:
    assert accepts_gzip(header) is expected
