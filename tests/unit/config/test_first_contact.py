"""Configuration a newcomer gets wrong is refused where it is written, naming the file, the key
and what to write instead (issue 31); ``config show`` and ``config validate`` say what the agent
will do."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpu_otel_agent.cli import main
from gpu_otel_agent.config.load import ConfigError, load
from gpu_otel_agent.export.otlp.target import ExporterConfigError, resolve_target


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_typo_in_a_group_name_is_refused_with_the_group_meant(tmp_path: Path) -> None:
    path = _file(tmp_path, "groups:\n  fastt: {interval: 1}\n")
    with pytest.raises(ConfigError, match=r"groups\.fastt in .*agent\.yaml: unknown group; "
                                          r"did you mean 'fast'\?"):
        load(path, environ={})


def test_another_group_name_is_taken_for_a_plugin_and_named_in_the_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _file(tmp_path, "groups:\n  nvswitch: {interval: 3}\n")
    with caplog.at_level(logging.WARNING):
        config = load(path, environ={})
    assert config.groups["nvswitch"].interval == 3
    assert "groups.nvswitch" in caplog.text and "not one of the core's groups" in caplog.text


def test_a_relative_spool_path_is_refused_in_the_file_and_the_environment(
        tmp_path: Path) -> None:
    path = _file(tmp_path, "health:\n  spool_path: spool\n")
    with pytest.raises(ConfigError, match=r"health\.spool_path in .*absolute directory path"):
        load(path, environ={})
    with pytest.raises(ConfigError, match=r"GPU_AGENT_EVENT_SPOOL.*absolute"):
        load(None, environ={"GPU_AGENT_EVENT_SPOOL": "var/spool"})
    assert load(None, environ={"GPU_AGENT_EVENT_SPOOL": "/var/spool"}).health.spool_path \
        == "/var/spool"


@pytest.mark.parametrize("endpoint", ["ftp://collector:4317", "grpc://collector:4317",
                                      "http://"])
def test_an_endpoint_otlp_is_not_sent_over_is_refused(tmp_path: Path, endpoint: str) -> None:
    path = _file(tmp_path, f"otlp:\n  endpoint: {endpoint}\n")
    with pytest.raises(ConfigError, match=r"otlp\.endpoint in"):
        load(path, environ={})
    config = load(None, environ={})
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        with pytest.raises(ExporterConfigError, match=f"environment variable {variable}"):
            resolve_target(config, {variable: endpoint}, "METRICS")


@pytest.mark.parametrize("endpoint", ["http://collector:4317", "https://collector",
                                      "collector:4317"])
def test_endpoints_the_sdk_accepts_still_are(tmp_path: Path, endpoint: str) -> None:
    config = load(_file(tmp_path, f"otlp:\n  endpoint: {endpoint}\n"), environ={})
    assert resolve_target(config, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, "METRICS")


def test_a_yaml_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = _file(tmp_path, "groups:\n  fast: {interval: 1\n")
    with pytest.raises(ConfigError) as caught:
        load(path, environ={})
    assert str(caught.value).startswith(f"{path}:3:1: not valid YAML: ")
    assert "<unicode string>" not in str(caught.value)


def test_config_show_prints_what_the_otel_variables_set(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "  protocol: http/protobuf\n" in out
    assert "  endpoint: http://collector:4318\n" in out
    assert "# otlp.protocol: from OTEL_EXPORTER_OTLP_PROTOCOL" in out


def test_config_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    good = _file(tmp_path, "groups:\n  fast: {interval: 1}\n")
    assert main(["config", "validate", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: valid\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("otlp:\n  endpoint: ftp://collector\n", encoding="utf-8")
    assert main(["config", "validate", str(bad)]) == 1
    assert "scheme 'ftp'" in capsys.readouterr().err
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector")
    assert main(["config", "validate", str(good)]) == 1
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in capsys.readouterr().err
