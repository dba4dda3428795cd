"""Run-time reconfiguration: groups switch on and off without a restart; bad files are refused."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
ENABLED = "groups: {slow: {enabled: true, interval: 0.25}}\n"
DISABLED = "groups: {slow: {enabled: false, interval: 0.25}}\n"


def _slow_points_after(store: Store, since: float) -> list[object]:
    return [p for p in store.points("gpu.performance_state", {"hw.id": UUIDS[0]})
            if p.received_at > since]


def _exports_pass(store: Store, count: int) -> None:
    seen = len(store.received("metrics"))
    store.wait_for(lambda s: len(s.received("metrics")) >= seen + count, timeout=60,
                   what=f"{count} more metric exports")


def test_sighup_and_file_change_reload_groups_and_reject_bad_files(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(ENABLED, encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, four_gpu_node.env,
                         ["--config", str(config), "--interval", "0.25",
                          "--export-interval", "0.25"])
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _slow_points_after(s, 0), timeout=15)
        config.write_text(DISABLED, encoding="utf-8")
        agent.process.send_signal(signal.SIGHUP)
        store.wait_for(lambda s: "configuration reloaded" in agent.log() or None, timeout=30)
        # Counted in exports, not seconds: the next few may still carry the last slow
        # sample; none after them does, while the fast group goes on.
        _exports_pass(store, 3)
        settled = time.time()
        _exports_pass(store, 6)
        assert _slow_points_after(store, settled) == []
        assert [p for p in store.points("hw.power") if p.received_at > settled]

        # A broken file is refused with its reason; the agent keeps its configuration.
        config.write_text("groups: {slow: {interval: -3}}\n", encoding="utf-8")
        agent.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "reload rejected" not in agent.log():
            assert time.monotonic() < deadline, agent.log()
            time.sleep(0.1)
        assert "groups.slow.interval" in agent.log()
        assert agent.process.poll() is None

        # Editing the file (no signal) is picked up by the watcher.
        config.write_text(ENABLED, encoding="utf-8")
        enabled_at = time.time()
        store.wait_for(lambda s: _slow_points_after(s, enabled_at), timeout=30)
    finally:
        agent.shutdown()
        agent.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)


def test_config_show_prints_effective_configuration(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("export_interval: 30\notlp: {headers: {authorization: secret}}\n")
    shown = _cli("config", "show", "--config", str(config), "--interval", "2")
    assert shown.returncode == 0, shown.stderr
    assert "export_interval: 30.0" in shown.stdout
    assert "interval: 2.0" in shown.stdout
    assert "secret" not in shown.stdout  # headers carry credentials


def test_bad_configuration_exits_with_the_key_named(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {fast: {intervall: 1}}\n")
    result = _cli("run", "--config", str(config))
    assert result.returncode == 2
    assert "groups.fast.intervall" in result.stderr and "unknown key" in result.stderr


def test_bad_scenario_is_reported_with_file_and_key(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("devices:\n  - model: X\n    utilization_gpu: lots\n")
    result = _cli("run", "--simulate", str(scenario), "--exporter", "console")
    assert result.returncode == 2
    assert "bad.yaml:3: devices[0].utilization_gpu: expected a number" in result.stderr
    assert "Traceback" not in result.stderr
