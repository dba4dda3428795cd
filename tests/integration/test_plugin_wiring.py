"""``gpu-agent run`` on a GPU node: plugins come in through entry points, a broken one is
reported once by name and the agent exports on, and the simulator is never imported.

The node is the simulated one started separately (its ``libnvidia-ml.so.1`` is a real C
library found through ``LD_LIBRARY_PATH``), so the agent runs exactly as on a GPU node: no
``--simulate``. Which modules the agent imported is read from ``sys.modules`` inside the agent's
own process when ``main`` has returned after SIGTERM: the harness's command runs under a small
launcher (:data:`LAUNCHER`) that runs the CLI module as ``python -m`` would and then writes the
list. (``-X importtime`` cannot be used: it does not log modules loaded with
``importlib.import_module``, which is how entry points are loaded.)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests import plugin_dist
from tests.integration.exports import select, wait_export
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
SIMULATOR = "gpu_otel_agent.simulation.node"
FAST = ["--interval", "0.2", "--export-interval", "0.3"]
MODULES_FILE_ENV = "PLUGIN_WIRING_MODULES_FILE"
# Given the harness's command (python -m gpu_otel_agent.cli run ...) as its arguments: runs that
# module in this process, then writes which gpu_otel_agent.plugins modules it imported.
LAUNCHER = f"""
MODULES_FILE_ENV = {MODULES_FILE_ENV!r}
import json, os, runpy, sys
python, flag, module, *args = sys.argv[1:]
assert flag == "-m", sys.argv
sys.argv = [module, *args]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
finally:
    with open(os.environ[MODULES_FILE_ENV], "w") as out:
        json.dump(sorted(m for m in sys.modules if m.startswith("gpu_otel_agent.plugins")), out)
"""


def _wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)


def test_run_loads_plugins_through_entry_points_and_never_the_simulator(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    site = plugin_dist.install(tmp_path / "site")
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        MODULES_FILE_ENV: str(tmp_path / "modules.json"),
        plugin_dist.MARKER_ENV: str(marks),
    }
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, four_gpu_node.env, FAST, env,
                         wrapper=(sys.executable, "-c", LAUNCHER))
    try:
        wait_export(otlp_grpc_receiver.store, lambda pts: select(pts, "hw.gpu.utilization"),
                    "device metrics beside the broken plugins")
        _wait_for(marks / "ran")  # the third party's node plugin was started and run
        agent.terminate(timeout=60)
        log = agent.log()
    finally:
        agent.close()

    assert agent.process.returncode == 0, log[-4000:]
    imported = json.loads((tmp_path / "modules.json").read_text())
    # The list holds the plugins that were used (the backend that served the GPUs)...
    assert "gpu_otel_agent.plugins.nvidia.backend" in imported
    # ...and nothing of the simulator, once the run is over.
    assert not [m for m in imported if m == SIMULATOR or m.startswith(SIMULATOR + ".")]
    assert (marks / "closed").read_text() == "closed"  # closed at shutdown
    for name in (plugin_dist.BROKEN_COMMAND, plugin_dist.BROKEN_NODE_PLUGIN,
                 plugin_dist.BROKEN_BACKEND):
        reports = [line for line in log.splitlines()
                   if f"plugin {name} " in line and "could not be loaded" in line]
        assert len(reports) == 1, (name, reports)
    crashed = [line for line in log.splitlines()
               if f"node plugin {plugin_dist.CRASHING_NODE_PLUGIN} failed to start" in line]
    assert len(crashed) == 1
