"""``run --simulate ... --exporter console``: what a person reads, checked against what the
simulated node serves (a reading set from the shell, an XID injected from it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.integration.harness import AgentProcess
from tests.polling import wait_until

SCENARIO = Path(__file__).resolve().parents[2] / "examples/scenarios/h100-8gpu.yaml"
FAST = ["--interval", "0.2", "--export-interval", "0.5"]
GPU_LINE = re.compile(r"^\d\d:\d\d:\d\d NVIDIA (\d) H100 80GB HBM3: util (\S+)  mem \S+ GiB"
                      r"  \S+  \S+  health (\w+)", re.MULTILINE)


def test_the_console_prints_a_line_per_gpu_per_export_and_each_event(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"  # the simulated node's well-known control socket: the test's own
    xdg.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(xdg)}
    agent = AgentProcess(tmp_path, "http://127.0.0.1:1", None,
                         ["--simulate", str(SCENARIO), "--exporter", "console", *FAST], env)

    def sim(*argv: str) -> None:
        done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "sim", *argv],
                              env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr

    try:
        wait_until(lambda: len(GPU_LINE.findall(agent.log())) >= 16,
                   what="no two exports of eight GPU lines")
        sim("set", "--device", "3", "utilization_gpu=37")
        wait_until(lambda: ("3", "37%", "ok") in GPU_LINE.findall(agent.log()),
                   what="the utilization set on GPU 3 never reached the console")
        sim("xid", "--device", "2", "--code", "79")
        wait_until(lambda: re.search(r"EVENT \w+ gpu\.xid NVIDIA 2: XID 79 \w+ -> \w+",
                                     agent.log()) is not None,
                   what="the XID never reached the console")
        agent.shutdown()
        assert agent.process.returncode == 0, agent.log()
    finally:
        agent.close()
    log = agent.log()
    lines = GPU_LINE.findall(log)
    # Every export prints each GPU once, in order: the lines come in whole runs of 0..7.
    indices = [int(index) for index, _, _ in lines]
    assert indices == [i % 8 for i in range(len(indices))], indices
    assert '"resource_metrics"' not in log and '"name": "hw.gpu.utilization"' not in log
    event = next(line for line in log.splitlines() if "gpu.xid" in line and "EVENT" in line)
    assert "hit: training/llm-train-0" in event or os.geteuid() != 0, event
