"""Process-wide logging setup: one line per event, level from the configuration."""

from __future__ import annotations

import logging


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # The OTLP exporter logs every retry; one line from us per outage is enough.
    logging.getLogger("opentelemetry.exporter.otlp").setLevel(logging.ERROR)
