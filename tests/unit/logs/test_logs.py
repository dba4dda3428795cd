from __future__ import annotations

import logging

from gpu_otel_agent.logs import RateLimit


def _record(msg: str, name: str = "opentelemetry.exporter.otlp.proto.grpc.exporter",
            ) -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, (), None)


def test_rate_limit_passes_one_per_period_and_reports_what_it_held() -> None:
    now = [0.0]
    limit = RateLimit(60.0, prefix="opentelemetry.exporter.otlp", clock=lambda: now[0])
    assert limit.filter(_record("Failed to export %s"))
    assert not limit.filter(_record("Failed to export %s"))
    assert not limit.filter(_record("Failed to export %s"))
    assert limit.filter(_record("another message"))
    now[0] = 61.0
    record = _record("Failed to export %s")
    assert limit.filter(record)
    assert "2 similar messages suppressed" in str(record.msg)


def test_other_loggers_are_never_limited() -> None:
    limit = RateLimit(60.0, prefix="opentelemetry.exporter.otlp", clock=lambda: 0.0)
    name = "gpu_otel_agent.sampling.sampler"
    assert all(limit.filter(_record("GPU lost", name=name)) for _ in range(3))
