"""Plugins are found through entry points, a broken one is reported once and left out, and
commands that do not need the simulator never import it.

The third party's plugins are a real distribution in a directory of their own
(:mod:`tests.plugin_dist`), found by ``importlib.metadata`` on ``sys.path``/``PYTHONPATH``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_otel_agent.config.load import Overrides, load
from gpu_otel_agent.extensions.loading import load_group
from gpu_otel_agent.extensions.node_plugin import NODE_PLUGIN_GROUP
from gpu_otel_agent.model.snapshot import SnapshotStore
from gpu_otel_agent.runtime.node_plugins import open_node_plugins
from tests import plugin_dist

SIMULATOR = "gpu_otel_agent.simulation.node"
REPO = Path(__file__).resolve().parents[3]
# Runs the CLI's main in a fresh interpreter and says which plugin (and simulator) modules it
# imported.
PROBE = """
import contextlib, io, json, sys
from gpu_otel_agent.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(
    m for m in sys.modules if m.startswith(("gpu_otel_agent.plugins",
                                            "gpu_otel_agent.simulation")))}))
"""


def _probe(*argv: str) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          check=True, timeout=60)
    result = json.loads(done.stdout.splitlines()[-1])
    return result["code"], result["modules"]


@pytest.mark.parametrize("argv", [
    ("config", "show"),
    ("docs", "cli"),
    ("docs", "config"),
    ("docs", "metrics"),
    ("docs", "events"),
])
def test_commands_without_the_simulated_node_do_not_import_the_simulator(
    argv: tuple[str, ...],
) -> None:
    code, modules = _probe(*argv)
    assert code == 0
    # The sim command group's arguments are loaded (every command builds the whole parser)...
    assert "gpu_otel_agent.simulation.sim_commands" in modules
    # ...but not the simulator itself.
    assert not [m for m in modules if m == SIMULATOR or m.startswith(SIMULATOR + ".")]


def test_a_sim_command_does_import_the_simulator(tmp_path: Path) -> None:
    # The same probe sees the simulator when it is used: the test above can fail.
    code, modules = _probe("sim", "stats", "--socket", str(tmp_path / "no-node.sock"))
    assert code == 1  # no node there
    assert f"{SIMULATOR}.control_client" in modules


def _third_party(tmp_path: Path) -> dict[str, str]:
    site = plugin_dist.install(tmp_path / "site")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def test_a_third_party_command_group_is_a_gpu_agent_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "hello", "--name", "there"],
                          env=_third_party(tmp_path), capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "hello there\n"), done.stderr
    # The broken command group of the same distribution: one line, by name, and the rest runs.
    reports = [line for line in done.stderr.splitlines() if "could not be loaded" in line]
    assert len(reports) == 1, done.stderr
    assert plugin_dist.BROKEN_COMMAND in reports[0]
    assert "ModuleNotFoundError" in reports[0]


def _docs(tmp_path: Path, topic: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "docs", topic],
                          env=_third_party(tmp_path), capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_third_party_doc_topic_is_a_gpu_agent_docs_page(tmp_path: Path) -> None:
    done = _docs(tmp_path, plugin_dist.DOC_TOPIC)
    assert (done.returncode, done.stdout) == (0, plugin_dist.DOC_PAGE), done.stderr


def test_a_doc_topic_cannot_take_the_name_of_a_core_page(tmp_path: Path) -> None:
    done = _docs(tmp_path, plugin_dist.TAKEN_DOC_TOPIC)
    committed = (REPO / "docs" / f"{plugin_dist.TAKEN_DOC_TOPIC}.md").read_text(encoding="utf-8")
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == committed.rstrip("\n")  # the core's page, not the plugin's
    taken = [line for line in done.stderr.splitlines()
             if f"doc topic {plugin_dist.TAKEN_DOC_TOPIC} of a plugin left out" in line]
    assert len(taken) == 1, done.stderr


def test_the_core_commands_still_work_beside_a_broken_plugin(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "config", "show"],
                          env=_third_party(tmp_path), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "exporter:" in done.stdout
    assert done.stderr.count("could not be loaded") == 1


def test_a_plugin_that_cannot_load_is_reported_once_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.syspath_prepend(str(plugin_dist.install(tmp_path / "site")))
    caplog.set_level(logging.ERROR, logger="gpu_otel_agent.extensions.loading")
    first = load_group(NODE_PLUGIN_GROUP)
    second = load_group(NODE_PLUGIN_GROUP)  # a second look-up reports nothing new
    names = [entry.name for entry in first]
    assert names == [entry.name for entry in second]
    assert "traces" in names and "ebpf" in names  # the third party's and ours
    assert plugin_dist.BROKEN_NODE_PLUGIN not in names
    reports = [r.getMessage() for r in caplog.records
               if r.name == "gpu_otel_agent.extensions.loading"]
    assert len(reports) == 1, reports
    assert plugin_dist.BROKEN_NODE_PLUGIN in reports[0]
    assert "libthird-party-gpu-plugin-missing.so.7" in reports[0]  # what is missing


def test_a_node_plugin_that_raises_at_start_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.syspath_prepend(str(plugin_dist.install(tmp_path / "site")))
    monkeypatch.setenv(plugin_dist.MARKER_ENV, str(tmp_path))
    caplog.set_level(logging.ERROR, logger="gpu_otel_agent.runtime.node_plugins")
    running = open_node_plugins(load(None, Overrides()), lambda: None, list, SnapshotStore())
    assert [p.name for p in running] == ["traces"]  # ebpf is off by default
    reports = [r.getMessage() for r in caplog.records
               if r.name == "gpu_otel_agent.runtime.node_plugins"]
    assert len(reports) == 1 and plugin_dist.CRASHING_NODE_PLUGIN in reports[0], reports
    assert "this plugin has a bug" in reports[0]


def test_run_simulate_brings_the_simulated_node_through_its_entry_point(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    done = subprocess.run([sys.executable, "-c", PROBE, "run", "--simulate", str(missing)],
                          capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 2  # a scenario that cannot be read is a clear error...
    assert f"gpu-agent: simulated node: {missing}" in done.stderr
    assert f"{SIMULATOR}.run_simulate" in result["modules"]  # ...said by the simulator's node
