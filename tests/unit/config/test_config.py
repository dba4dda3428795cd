from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.config.load import ConfigError, Overrides, load


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return path


def test_defaults_without_file() -> None:
    config = load(None, environ={})
    assert config.exporter == "otlp"
    assert config.groups["fast"].interval == 5.0
    assert config.groups["slow"].enabled


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    path = write(tmp_path, "export_interval: 30\ngroups:\n  fast: {interval: 7}\n")
    assert load(path, environ={}).export_interval == 30
    env = {"OTEL_METRIC_EXPORT_INTERVAL": "15000", "GPU_AGENT_INTERVAL": "3"}
    from_env = load(path, environ=env)
    assert from_env.export_interval == 15.0
    assert from_env.groups["fast"].interval == 3.0
    flagged = load(path, Overrides(interval=0.5, export_interval=2), environ=env)
    assert flagged.groups["fast"].interval == 0.5
    assert flagged.export_interval == 2


def test_error_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "groups:\n  fast: {interval: -1}\n")
    with pytest.raises(ConfigError, match=r"groups\.fast\.interval in .*agent\.yaml: must be"):
        load(path, environ={})


def test_unknown_key_is_rejected_with_known_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "exporterr: otlp\n")
    with pytest.raises(ConfigError, match=r"exporterr in .*: unknown key \(known: .*exporter"):
        load(path, environ={})


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="OTEL_METRIC_EXPORT_INTERVAL"):
        load(None, environ={"OTEL_METRIC_EXPORT_INTERVAL": "soon"})


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(write(tmp_path, "groups: [\n"), environ={})


def test_bad_exporter_choice(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"exporter in .*: must be one of otlp, console"):
        load(write(tmp_path, "exporter: prometheus\n"), environ={})


def test_group_can_be_disabled(tmp_path: Path) -> None:
    config = load(write(tmp_path, "groups:\n  slow: {enabled: false}\n"), environ={})
    assert not config.groups["slow"].enabled
    assert config.groups["slow"].interval == 30.0


def test_health_keys_defaults_file_and_environment(tmp_path: Path) -> None:
    default = load(None, environ={}).health
    assert (default.enabled, default.kmsg, default.storm_window) == (True, True, 10.0)
    path = write(tmp_path, "health: {kmsg: false, storm_window: 2, dedup_window: 0.5, "
                           "spool_path: /tmp/x, spool_max_mib: 1}\n")
    health = load(path, environ={"GPU_AGENT_EVENT_SPOOL": "/tmp/y"}).health
    assert (health.kmsg, health.storm_window, health.dedup_window) == (False, 2.0, 0.5)
    assert (health.spool_path, health.spool_max_mib) == ("/tmp/y", 1.0)
    assert load(write(tmp_path, "health: {spool_path: null}\n"), environ={}).health.spool_path \
        is None


@pytest.mark.parametrize(("text", "message"), [
    ("health: {kmsg: 'yes'}", r"health\.kmsg in .*agent\.yaml: expected true or false"),
    ("health: {storm_window: 0}", r"health\.storm_window in .*: must be a positive number"),
    ("health: {spool_max_mib: -3}", r"health\.spool_max_mib in .*: must be between"),
    ("health: {spool_path: ''}", r"health\.spool_path in .*: expected an absolute directory "
     r"path"),
    ("health: {spool: 1}",
     r"health\.spool in .*: unknown key \(known: clear_after, dedup_window, degrade_after, "
     r"enabled"),
])
def test_bad_health_keys_name_key_and_file(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(write(tmp_path, text + "\n"), environ={})
