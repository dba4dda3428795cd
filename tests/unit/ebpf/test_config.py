"""The ``ebpf:`` section and ``attribution.process_events``: defaults and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.config.load import ConfigError, load, to_tree
from gpu_otel_agent.config.schema import AgentConfig


def _load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> AgentConfig:
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    return load(path, environ=environ or {})


def test_off_by_default_with_netlink_process_events() -> None:
    config = load(None, environ={})
    assert not config.ebpf.enabled
    assert config.ebpf.object_path is None
    assert config.attribution.process_events == "netlink"
    assert to_tree(config)["ebpf"]["max_allocations"] == 65536


def test_turned_on_from_the_file_or_the_environment(tmp_path: Path) -> None:
    config = _load(tmp_path, "ebpf: {interval: 0.5, object_path: /opt/cuda_activity.bpf.o}\n"
                   "attribution: {process_events: ebpf}\n", {"GPU_AGENT_EBPF_ENABLED": "true"})
    assert config.ebpf.enabled
    assert config.ebpf.interval == 0.5
    assert config.ebpf.object_path == "/opt/cuda_activity.bpf.o"
    assert config.attribution.process_events == "ebpf"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ebpf: {enabled: sometimes}", r"ebpf\.enabled in .*agent\.yaml: expected true or false"),
        ("ebpf: {object_path: build/x.o}", r"ebpf\.object_path .*absolute path or null"),
        ("ebpf: {max_allocations: 0}", r"ebpf\.max_allocations .*at least 1"),
        ("ebpf: {interval: -1}", r"ebpf\.interval .*positive"),
        ("ebpf: {workload_retention: 0}", r"ebpf\.workload_retention .*positive"),
        ("ebpf: {enabeld: true}", r"ebpf\.enabeld .*unknown key"),
        ("attribution: {process_events: bpf}", r"attribution\.process_events .*netlink.*ebpf"),
    ],
)
def test_bad_values_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text + "\n")


def test_the_process_series_bound_is_configurable(tmp_path: Path) -> None:
    assert load(None, environ={}).ebpf.max_process_series == 1024
    assert _load(tmp_path, "ebpf: {max_process_series: 10}\n").ebpf.max_process_series == 10
    with pytest.raises(ConfigError, match=r"ebpf\.max_process_series .*whole number >= 0"):
        _load(tmp_path, "ebpf: {max_process_series: -3}\n")
