"""Which paths a simulated run moves into its node's directory: the production ones only."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.config.load import load
from gpu_otel_agent.extensions.simulation import RunPaths


def test_the_defaults_move_into_the_node_directory(tmp_path: Path) -> None:
    config = RunPaths(tmp_path).apply(load(None, environ={}))
    assert config.health.spool_path == str(tmp_path / "events")
    assert config.local_endpoint.socket == str(tmp_path / "agent.sock")


def test_a_production_path_set_on_purpose_moves_too(tmp_path: Path) -> None:
    # /var/run is /run on every current distribution; a file naming either is the node's.
    environ = {"GPU_AGENT_EVENT_SPOOL": "/var/lib/gpu-otel-agent/other",
               "GPU_AGENT_LOCAL_SOCKET": "/run/gpu-otel-agent/x.sock"}
    config = RunPaths(tmp_path).apply(load(None, environ=environ))
    assert config.health.spool_path == str(tmp_path / "events")
    assert config.local_endpoint.socket == str(tmp_path / "agent.sock")


def test_paths_elsewhere_and_no_spool_are_kept(tmp_path: Path) -> None:
    environ = {"GPU_AGENT_EVENT_SPOOL": str(tmp_path / "mine"),
               "GPU_AGENT_LOCAL_SOCKET": str(tmp_path / "top" / "agent.sock")}
    config = RunPaths(tmp_path / "node").apply(load(None, environ=environ))
    assert config.health.spool_path == str(tmp_path / "mine")
    assert config.local_endpoint.socket == str(tmp_path / "top" / "agent.sock")
    off = tmp_path / "off.yaml"
    off.write_text("health:\n  spool_path: null\n", encoding="utf-8")
    assert RunPaths(tmp_path).apply(load(off, environ={})).health.spool_path is None


def test_not_a_simulated_run_changes_nothing() -> None:
    config = load(None, environ={})
    assert RunPaths().apply(config) is config
