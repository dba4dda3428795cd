"""The attribution section of the configuration: defaults and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.config.load import ConfigError, load, to_tree


def _load(tmp_path: Path, text: str, environ: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    return load(path, environ=environ or {})


def test_defaults_keep_command_lines_private() -> None:
    config = load(None, environ={})
    assert config.attribution.enabled
    assert not config.attribution.export_command_line
    assert config.attribution.max_process_series == 256
    assert config.attribution.kubelet.socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert config.groups["processes"].enabled
    assert to_tree(config)["attribution"]["kubelet"]["refresh_interval"] == 30.0


def test_values_from_file_and_environment(tmp_path: Path) -> None:
    config = _load(tmp_path, "attribution:\n  max_process_series: 10\n"
                   "  memory_resources: {example.com/gpu-memory: 1048576}\n"
                   "  kubelet: {socket: null}\n",
                   {"GPU_AGENT_KUBELET_SOCKET": "/run/k.sock"})
    assert config.attribution.max_process_series == 10
    assert dict(config.attribution.memory_resources) == {"example.com/gpu-memory": 1048576}
    assert config.attribution.kubelet.socket == "/run/k.sock"  # environment beats the file


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("attribution: {max_process_series: -1}",
         r"attribution\.max_process_series in .*agent\.yaml: expected a whole number >= 0"),
        ("attribution: {max_process_series: 2.5}", r"max_process_series .*got 2\.5"),
        ("attribution: {export_command_line: 'yes'}",
         r"attribution\.export_command_line .*expected true or false"),
        ("attribution: {kubelet: {socket: relative.sock}}",
         r"attribution\.kubelet\.socket .*expected an absolute path or null"),
        ("attribution: {kubelet: {refresh_interval: 0}}",
         r"attribution\.kubelet\.refresh_interval .*positive"),
        ("attribution: {memory_resources: {x/y: 0}}",
         r"attribution\.memory_resources .*'x/y': expected a positive whole number"),
        ("attribution: {cgroup_root: sys}", r"attribution\.cgroup_root .*absolute path"),
        ("attribution: {kubelet: {sockt: /a}}", r"attribution\.kubelet\.sockt .*unknown key"),
    ],
)
def test_bad_values_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text + "\n")
