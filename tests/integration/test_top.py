"""``gpu-agent top`` in a real pseudo-terminal, attached to a real agent through its local
endpoint: the simulated node's values, a process in a pod cgroup named by the test kubelet, an
XID injected while it runs, keys, a resize and a clean quit; then the plain and JSON snapshots,
and the standalone mode on a simulated node of its own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.integration.cgroups import Cgroups
from tests.integration.conftest import UUIDS
from tests.integration.harness import SCENARIOS, AgentProcess, h100, write_scenario
from tests.integration.terminal import Terminal
from tests.receivers.kubelet import FakeKubelet

pytestmark = pytest.mark.integration
TOP = [sys.executable, "-m", "gpu_otel_agent.cli", "top"]
# What the simulated node serves for each GPU (distinct, so a value in the wrong row shows).
SERVED = [
    {"utilization_gpu": 37, "temperature_c": 41, "power_w": 222, "sm_clock_mhz": 1410},
    {"utilization_gpu": 64, "temperature_c": 58, "power_w": 333, "sm_clock_mhz": 1755},
]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    devices = [h100(i, uuid=UUIDS[i], **SERVED[i]) for i in range(2)]
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": devices})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as sim:
        yield sim


def _row(screen: str, gpu: int) -> str:
    (row,) = [line for line in screen.splitlines() if re.match(rf"\s+{gpu} H100 ", line)]
    return row


def _served(row: str, gpu: int) -> bool:
    served = SERVED[gpu]
    return all(f" {text} " in f"{row} " for text in (
        f"{served['utilization_gpu']}%", f"{served['temperature_c']}C",
        f"{served['power_w']}W", str(served["sm_clock_mhz"])))


def test_top_shows_the_node_its_pods_and_an_xid_as_it_arrives(
    node: SimulatedNode, groups: Cgroups, v2: Path, tmp_path: Path,
) -> None:
    pod = groups.pod(v2, "trainer-7", "burstable", "cgroupfs", namespace="vision")
    in_pod = groups.spawn(pod.cgroup)
    on_host = groups.spawn(v2 / "unified" if (v2 / "unified").is_dir() else v2)
    for device, pid, mib in ((1, in_pod, 3000), (0, on_host, 500)):
        assert node.command({"op": "proc_add", "device": device, "pid": pid,
                             "used_memory_mib": mib, "sm_util": 20})["ok"]
    config = tmp_path / "agent.yaml"
    with FakeKubelet(tmp_path / "kubelet" / "kubelet.sock") as kubelet:
        kubelet.set_pods([PodAllocation(pod.namespace, pod.name, (ContainerAllocation(
            "main", (ContainerDevices("nvidia.com/gpu", (UUIDS[1],)),)),))])
        config.write_text(
            "groups: {processes: {interval: 0.3}, slow: {interval: 5}}\n"
            f"attribution: {{reconcile_interval: 1, kubelet: {{socket: {kubelet.socket_path},"
            " refresh_interval: 1, timeout: 2}}\n", encoding="utf-8")
        agent = AgentProcess(tmp_path, "http://127.0.0.1:1", node.env,
                             ["--interval", "0.3", "--exporter", "none", "--config", str(config)]
                             ).answering()
        try:
            env = {**os.environ, "NO_COLOR": "1"}
            terminal = Terminal([*TOP, "--socket", str(agent.socket_path), "--refresh", "0.3"],
                                env)
            try:
                screen = terminal.wait_for(lambda s: "trainer-7" in s and "vision" in s,
                                           "the process in the pod cgroup, with its pod")
                assert re.match(r"gpu-agent top \d\d:\d\d:\d\d · attached to agent ", screen)
                screen = terminal.wait_for(lambda s: _served(_row(s, 0), 0)
                                           and _served(_row(s, 1), 1),
                                           "every GPU's values as the node serves them")
                assert _row(screen, 1).rstrip().endswith("ok")
                host_row = [line for line in screen.splitlines() if f" {on_host} " in line]
                assert host_row and "vision" not in host_row[0]
                # NO_COLOR: styled (the headers are reversed) but not one coloured character.
                cells = [c for row in terminal.screen.buffer.values() for c in row.values()]
                assert any(c.reverse for c in cells)
                assert {c.fg for c in cells} == {"default"}

                assert node.command({"op": "xid", "device": 1, "code": 79})["ok"]
                screen = terminal.wait_for(
                    lambda s: "XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS -> RESTART_BM" in s
                    and "hit: vision/trainer-7" in s and "failed" in _row(s, 1),
                    "the XID in the feed with its catalog name, action and the pod hit")

                terminal.type(b"/pod:trainer\r")
                screen = terminal.wait_for(
                    lambda s: "filter:pod:trainer" in s and f" {on_host} " not in s,
                    "the pod filter applied")
                # The pod's process was on GPU 1, lost since XID 79: the filter keeps the event.
                assert "hit: vision/trainer-7" in screen
                terminal.type(b"s")
                terminal.wait_for(lambda s: "sort:utilization" in s, "the next sort order")

                terminal.resize(30, 110)
                screen = terminal.wait_for(
                    lambda s: len(s.splitlines()) == 30 and "sort:utilization" in s.splitlines()[-1]
                    and any(len(line) > 80 for line in s.splitlines()),
                    "the screen redrawn at 110x30, footer on the last row")

                terminal.type(b"q")
                assert terminal.wait_exit() == 0
            finally:
                terminal.close()
            once = subprocess.run([*TOP, "--socket", str(agent.socket_path), "--once"],
                                  capture_output=True, text=True, timeout=60, check=True,
                                  env={**os.environ, "COLUMNS": "80"})
            assert all(len(line) <= 80 for line in once.stdout.splitlines())
            assert _served(_row(once.stdout, 0), 0)
            assert "XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in once.stdout
            data = json.loads(subprocess.run(
                [*TOP, "--socket", str(agent.socket_path), "--json"], capture_output=True,
                text=True, timeout=60, check=True).stdout)
            # GPU 1 fell off the bus (XID 79): it is lost, its processes are no longer read;
            # the XID event keeps whom it hit.
            assert not [p for d in data["snapshot"]["devices"] for p in d["processes"]
                        if p["pid"] == in_pod]
            xids = [e for e in data["events"]["events"] if e["name"] == "gpu.xid"]
            assert xids and xids[0]["workloads"][0]["k8s.pod.name"] == pod.name
            agent.shutdown()  # a clean exit with its run summary
        finally:
            agent.close()  # whatever failed above: no agent outlives the test


def test_top_standalone_on_a_simulated_node_and_without_an_agent(tmp_path: Path) -> None:
    # By name: the scenario ships in the wheel, so this works wherever the agent is installed.
    first, gpus = _once(["--simulate", "h100-8gpu"], tmp_path, {**os.environ, "COLUMNS": "80"})
    assert re.match(r"gpu-agent top \d\d:\d\d:\d\d · standalone: simulated node "
                    r"h100-8gpu \(pid \d+\)$", first), first
    assert gpus == 8
    # Live: killed with SIGTERM (a closed window), top stops the agent it started.
    terminal = Terminal([*TOP, "--simulate", str(SCENARIOS / "h100-8gpu.yaml")],
                        dict(os.environ))
    try:
        screen = terminal.wait_for(lambda s: "(pid " in s and " 7 H100" in s, "standalone")
        match = re.search(r"simulated node h100-8gpu.yaml \(pid (\d+)\)", screen)
        assert match, screen
        child = Path(f"/proc/{match.group(1)}")
        assert child.exists()
        terminal.process.send_signal(signal.SIGTERM)
        assert terminal.wait_exit() == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while child.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not child.exists(), "the standalone agent outlived top"
    finally:
        terminal.close()
    # A socket named on purpose: no agent there is an error, not a quiet substitute.
    missing = subprocess.run([*TOP, "--socket", str(tmp_path / "none.sock"), "--once"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2
    assert "no agent serves" in missing.stderr
    assert "gpu-agent top --simulate h100-8gpu" in missing.stderr


def _once(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, int]:
    """``top --once``: its title and how many GPU rows it printed."""
    once = subprocess.run([*TOP, *args, "--once"], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env, check=False)
    assert once.returncode == 0, once.stderr
    lines = once.stdout.splitlines()
    return lines[0], len([line for line in lines if re.match(r"\s+\d H100 80GB HBM3 ", line)])


def _no_agent_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPU_SIM_") and k != "LD_LIBRARY_PATH"}
    return {**env, "COLUMNS": "80", "GPU_AGENT_LOCAL_SOCKET": str(tmp_path / "agent.sock"),
            "GPU_AGENT_EVENT_SPOOL": str(tmp_path / "spool"), **extra}


def test_top_without_an_agent_samples_the_node_itself_and_writes_nothing(
        node: SimulatedNode, tmp_path: Path) -> None:
    """No agent at the configured socket: top samples the node it is attached to (here the
    simulated node of a `gpu-agent sim up`, by its environment), says so, and writes no
    spool, no socket, nothing it leaves behind."""
    work = tmp_path / "top"
    work.mkdir()
    # Its temporary directory goes where TMPDIR says: one of this test's own, so that other
    # runs on the machine (their `top`s in /tmp) cannot confuse the check.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    first, gpus = _once([], work, _no_agent_env(work, TMPDIR=str(temporary), **node.env))
    assert re.match(r"gpu-agent top \d\d:\d\d:\d\d · standalone: sim up node \(pid \d+; "
                    r"no agent\)$", first), first
    assert gpus == 2
    assert list(work.iterdir()) == []  # no spool, no socket
    assert list(temporary.iterdir()) == []  # its temporary directory removed


def test_top_without_an_agent_or_a_gpu_says_so_and_what_to_try(tmp_path: Path) -> None:
    once = subprocess.run([*TOP, "--once"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=_no_agent_env(tmp_path), check=False)
    assert once.returncode == 2
    assert "sampling this node failed" in once.stderr
    assert "no GPU backend could start" in once.stderr
    assert "gpu-agent top --simulate h100-8gpu" in once.stderr
