"""``gpu-agent check`` on this machine against the simulated node: a live collector (the test
point and record arrive), a stopped one, a TLS collector whose certificate another CA signed,
and a kubelet socket that is missing; the lines and the exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.pods import PodAllocation
from tests.integration.test_agent_tls import _self_signed
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
CHECK = [sys.executable, "-m", "gpu_otel_agent.cli", "check"]


def _check(node: SimulatedNode, tmp_path: Path, kubelet: Path, endpoint: str,
           env: Mapping[str, str] = (), *args: str) -> tuple[int, str]:
    config = tmp_path / "agent.yaml"
    config.write_text(f"attribution: {{kubelet: {{socket: {kubelet}, timeout: 3}}}}\n",
                      encoding="utf-8")
    full = {**os.environ, **node.env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "GPU_AGENT_EVENT_SPOOL": str(tmp_path / "spool"),
            "GPU_AGENT_LOCAL_SOCKET": str(tmp_path / "no-agent.sock"), **dict(env)}
    full.pop("KUBERNETES_SERVICE_HOST", None)
    full.update(env)
    done = subprocess.run([*CHECK, "--config", str(config), *args], env=full,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


def _line(output: str, name: str) -> str:
    (line,) = [line for line in output.splitlines() if line[6:].startswith(name + " ")]
    return line


def test_check_against_a_live_then_a_stopped_collector(four_gpu_node: SimulatedNode,
                                                        tmp_path: Path) -> None:
    node = four_gpu_node
    with FakeKubelet(tmp_path / "kubelet" / "kubelet.sock") as kubelet, \
            OtlpGrpcReceiver() as receiver:
        kubelet.set_pods([PodAllocation("ml", "trainer-0", ())])
        code, output = _check(node, tmp_path, kubelet.socket_path, receiver.endpoint)
        assert code == 0, output
        assert _line(output, "nvidia library").startswith("PASS")
        assert "driver 580.95.05, 4 GPU(s)" in output
        assert _line(output, "gpu 1").startswith("PASS")
        assert _line(output, "kubelet pod-resources").startswith("PASS")
        assert "answers: 1 pod(s)" in output
        for signal, what in (("metrics", "point"), ("logs", "record")):
            line = _line(output, f"collector {signal}")
            assert line.startswith("PASS"), line
            assert f"accepted the test {what} in " in line and line.endswith(" ms")
        # What check sent arrived: one point of gpu_agent.check, one record of the same name.
        (point,) = receiver.store.points("gpu_agent.check")
        assert point.value == 1
        (record,) = receiver.store.logs()
        assert record.event_name == "gpu_agent.check"
        assert record.severity_text == "INFO"
        assert kubelet.calls["List"] == 1

        receiver.stop()
        code, output = _check(node, tmp_path, kubelet.socket_path, receiver.endpoint,
                              {}, "--json")
    assert code == 1, output
    document = json.loads(output)
    assert document["exit"] == 1
    failed = {c["name"]: c for c in document["checks"] if c["status"] == "fail"}
    assert set(failed) == {"collector metrics", "collector logs"}, output
    assert "nothing listens there (connection refused)" in failed["collector logs"]["detail"]
    assert "start the collector" in failed["collector logs"]["fix"]


def test_check_names_a_collector_certificate_from_another_ca_and_a_missing_kubelet(
        four_gpu_node: SimulatedNode, tmp_path: Path) -> None:
    node = four_gpu_node
    served_cert, served_key = _self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    other_ca, _ = _self_signed(tmp_path / "other")
    missing = tmp_path / "kubelet" / "kubelet.sock"
    with OtlpGrpcReceiver(tls=(served_cert.read_bytes(), served_key.read_bytes())) as receiver:
        code, output = _check(node, tmp_path, missing, receiver.endpoint,
                              {"OTEL_EXPORTER_OTLP_INSECURE": "false",
                               "OTEL_EXPORTER_OTLP_CERTIFICATE": str(other_ca),
                               "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
        assert receiver.store.logs() == [] and receiver.store.points("gpu_agent.check") == []
    assert code == 1, output
    for signal in ("metrics", "logs"):
        line = _line(output, f"collector {signal}")
        assert line.startswith("FAIL"), line
        assert "TLS: the collector's certificate is not signed by a CA we trust" in line
        assert str(other_ca) in line and "OTEL_EXPORTER_OTLP_CERTIFICATE" in line
    kubelet = _line(output, "kubelet pod-resources")
    assert kubelet.startswith("FAIL")  # in Kubernetes, pods would go unnamed
    assert f"no socket at {missing}" in kubelet
    assert "mount the host's /var/lib/kubelet/pod-resources" in kubelet
    assert _line(output, "gpu 0").startswith("PASS")
