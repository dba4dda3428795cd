"""The simulated node puts a scenario's placeholder processes in real cgroups or in none
(issue 31): on a cgroup-v1 host ``/sys/fs/cgroup`` is a tmpfs, where the node used to make
plain directories and a look-alike ``cgroup.procs`` file nothing reads and nobody could remove.
Now the path goes under a real hierarchy where the node may create cgroups, the process is
really in it (its /proc/PID/cgroup says so), it is gone after the node stops, and where it
cannot be placed the node says why."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.simulation.node.cgroups import ROOT, hierarchy
from tests.integration.harness import h100, write_scenario
from tests.integration.terminal import Terminal

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _placeholders(node: SimulatedNode) -> list[int]:
    """The node's sleeping placeholder processes (bounded wait: /proc's children lists are
    read while the node may still be starting them)."""
    deadline = time.monotonic() + 30
    while True:
        found = []
        for pid in _children(node.pid):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"):
                    found.append(pid)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.harness  # the simulated node, not the agent
def test_placeholder_processes_go_in_real_cgroups_or_none(tmp_path: Path) -> None:
    relative = f"gpu-sim-test/kubepods/burstable/pod{uuid.uuid4()}/{uuid.uuid4().hex}"
    scenario = write_scenario(tmp_path, {
        "devices": [h100(0)],
        "processes": [{"device": 0, "spawn": {"cgroup": relative}, "used_memory_mib": 100}]})
    base = hierarchy()
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        (pid,) = _placeholders(node)
        membership = Path(f"/proc/{pid}/cgroup").read_text()
        placed = f"/{relative}\n" in membership
        if base is not None and os.geteuid() == 0:
            assert placed, membership  # root on a host with a cgroup fs: a real cgroup
        if placed:
            assert base is not None
            assert (base / relative / "cgroup.procs").read_text().split() == [str(pid)]
            assert node.pods_missing is None
        else:
            assert node.pods_missing is not None
            assert "show no container or pod" in node.pods_missing
        # Never a directory of look-alike files outside a cgroup filesystem.
        if base != ROOT:
            assert not (ROOT / relative).exists()
    if base is not None:
        assert not (base / relative).exists()  # removed with the node
        assert not (base / relative.split("/", maxsplit=1)[0]).exists()


@pytest.mark.harness  # the simulated node, not the agent
def test_a_scenario_pod_is_named_by_the_nodes_own_kubelet(tmp_path: Path) -> None:
    """`pod: {name, namespace}` on a scenario process: the node puts it in a kubepods cgroup
    and serves the pod on a kubelet pod-resources socket of its own, which `--simulate` hands
    to the agent, so pods show by name off Kubernetes."""
    scenario = write_scenario(tmp_path, {
        "devices": [h100(0), h100(1)],
        "processes": [{"device": 0, "pod": {"name": "trainer-0", "namespace": "ml"},
                       "used_memory_mib": 2000, "sm_util": 20},
                      {"device": 1, "used_memory_mib": 100}]})
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "top", "--simulate",
                           str(scenario), "--json"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    processes = {p["pid"]: p for d in json.loads(done.stdout)["snapshot"]["devices"]
                 for p in d["processes"]}
    named = [p for p in processes.values() if p.get("pod") == "trainer-0"]
    if hierarchy() is not None and os.geteuid() == 0:
        (pod,) = named
        assert pod["namespace"] == "ml"
        assert len(processes) == 2  # the other process is in no pod
    else:  # no cgroup to put it in: no pod, and the node said why (its own test above)
        assert named == []


def test_check_on_a_scenario_with_pods_finds_the_nodes_kubelet(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {
        "devices": [h100(0)],
        "processes": [{"device": 0, "pod": {"name": "trainer-0"}, "used_memory_mib": 100}]})
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "check", "--simulate",
                           str(scenario), "--json"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path,
                          env={**os.environ, "GPU_AGENT_EVENT_SPOOL": str(tmp_path / "spool"),
                               "GPU_AGENT_LOCAL_SOCKET": str(tmp_path / "agent.sock")})
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    kubelet = checks["kubelet pod-resources"]
    assert kubelet["status"] == "pass", kubelet
    assert "1 pod(s)" in kubelet["detail"]


def test_top_repeats_why_a_process_shows_no_pod(tmp_path: Path) -> None:
    """top's own agent logs into a file the screen hides: what it warned about while starting
    (here, a process the node could not place in its cgroup) is repeated on stderr."""
    scenario = write_scenario(tmp_path, {
        "devices": [h100(0)],
        # cgroup.procs is a file in every cgroup: no cgroup can be made below it.
        "processes": [{"device": 0, "spawn": {"cgroup": "cgroup.procs/impossible"},
                       "used_memory_mib": 100}]})
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "top", "--simulate",
                           str(scenario), "--once"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gpu-agent top: note: simulated node: 1 scenario process(es) run outside their " \
           "cgroups, so they show no container or pod: " in done.stderr
    assert "event spool" not in done.stderr  # top's own choice, not news
    # Live, stderr is under the screen: the last line says it.
    runtime = tmp_path / "runtime"  # a default control-socket path of its own: one note
    runtime.mkdir()
    terminal = Terminal([sys.executable, "-m", "gpu_otel_agent.cli", "top", "--simulate",
                         str(scenario)], {**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    try:
        terminal.resize(30, 200)  # the whole note fits the last line
        terminal.wait_for(lambda s: "run outside their cgroups" in s.splitlines()[-1],
                          "the note on the last line")
        terminal.type(b"q")
        assert terminal.wait_exit() == 0
    finally:
        terminal.close()


def test_top_says_which_socket_reaches_its_node_when_the_default_is_taken(
        tmp_path: Path) -> None:
    """`gpu-agent sim xid` from a second shell finds a --simulate node by a link at a default
    path; where that path is taken (another node's), top says which socket reaches its own."""
    runtime = tmp_path / "runtime"
    (runtime / "gpu-otel-agent-sim").mkdir(parents=True)
    (runtime / "gpu-otel-agent-sim" / "control.sock").write_text("taken")
    scenario = write_scenario(tmp_path, {"devices": [h100(0)]})
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "top", "--simulate",
                           str(scenario), "--once"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert done.returncode == 0, done.stderr
    assert re.search(r"note: control socket not linked at .*: reach this node with "
                     r"GPU_SIM_SOCKET=\S+ gpu-agent sim", done.stderr), done.stderr
