"""Helpers shared by the simulator tests: scenario files and pynvml client subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpu_otel_agent.simulation.node import SimulatedNode

REPO = Path(__file__).resolve().parents[3]

_PRELUDE = """
import json, os, sys, time
sys.path.insert(0, {repo!r})
from gpu_otel_agent.simulation.node import attach_in_process
attach_in_process(dict(os.environ))
import pynvml as N
N.nvmlInit()
h = [N.nvmlDeviceGetHandleByIndex(i) for i in range(N.nvmlDeviceGetCount())]
def err(fn, *a):
    try:
        fn(*a)
        return "ok"
    except N.NVMLError as e:
        return type(e).__name__
def gpm_metrics(s1, s2, *ids):  # nvmlGpmMetricsGet: each metric's entry (.value, .nvmlReturn)
    mg = N.c_nvmlGpmMetricsGet_t()
    mg.version = N.NVML_GPM_METRICS_GET_VERSION
    mg.numMetrics = len(ids)
    mg.sample1, mg.sample2 = s1, s2
    for i, metric in enumerate(ids):
        mg.metrics[i].metricId = metric
    N.nvmlGpmMetricsGet(mg)
    return [mg.metrics[i] for i in range(len(ids))]
"""


def write_scenario(tmp: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp / name
    path.write_text(textwrap.dedent(text))
    return path


def client_env(node: SimulatedNode) -> dict[str, str]:
    env = dict(os.environ)
    env.update(node.env)
    return env


def client_script(code: str) -> str:
    return _PRELUDE.format(repo=str(REPO)) + textwrap.dedent(code)


def run_client(node: SimulatedNode, code: str, timeout: float = 30) -> Any:
    """Run ``code`` with pynvml attached to ``node`` in a fresh process; returns ``out``."""
    script = client_script(code) + "\nprint(json.dumps(out))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=client_env(node),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_client_dict(node: SimulatedNode, code: str, timeout: float = 120) -> dict[str, Any]:
    """:func:`run_client` for code whose ``out`` is a dict (most agent-code clients)."""
    out = run_client(node, code, timeout=timeout)
    assert isinstance(out, dict), out
    return out


@contextmanager
def started_node(tmp: Path, scenario: str) -> Iterator[SimulatedNode]:
    """A simulated node serving ``scenario`` with its state under ``tmp`` (module fixtures)."""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as node:
        yield node


def start_client(node: SimulatedNode, code: str) -> subprocess.Popen[str]:
    """Start a client that prints JSON lines as it goes (for blocking-call tests)."""
    return subprocess.Popen(
        [sys.executable, "-c", client_script(code)],
        env=client_env(node),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_json_line(proc: subprocess.Popen[str]) -> Mapping[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "client exited"
    result: Mapping[str, Any] = json.loads(line)
    return result
