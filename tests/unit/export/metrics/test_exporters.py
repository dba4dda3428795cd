"""The config file's otlp section fills in only what the OTEL_EXPORTER_OTLP_* variables leave."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.metrics.exporters import (
    ExporterConfigError,
    otlp_protocol,
    otlp_settings,
)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text("otlp: {endpoint: 'http://file:4317', protocol: http/protobuf, "
                    "headers: {x-tenant: file}, timeout: 4}\n")
    return path


def test_file_values_apply_where_the_environment_is_silent(tmp_path: Path) -> None:
    config = load(_config(tmp_path), environ={})
    assert otlp_settings(config, {}) == ("http/protobuf", {
        "endpoint": "http://file:4317/v1/metrics", "headers": {"x-tenant": "file"},
        "timeout": 4.0})
    assert otlp_protocol(config, {}) == "http/protobuf"
    # Health events go to the same collector, on the logs path.
    assert otlp_settings(config, {}, "LOGS")[1]["endpoint"] == "http://file:4317/v1/logs"


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    config = load(_config(tmp_path), environ={})
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317",
           "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-tenant=env",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert otlp_settings(config, env) == ("grpc", {"timeout": 4.0})
    assert otlp_protocol(config, env) == "grpc"
    # A signal's own variable wins for that signal only.
    logs_env = {"OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-tenant=logs"}
    assert "headers" not in otlp_settings(config, logs_env, "LOGS")[1]
    assert otlp_settings(config, logs_env, "METRICS")[1]["headers"] == {"x-tenant": "file"}


def test_unknown_protocol_names_the_variable(tmp_path: Path) -> None:
    config = load(None, environ={})
    with pytest.raises(ExporterConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        otlp_protocol(config, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
