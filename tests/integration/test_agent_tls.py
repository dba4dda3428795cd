"""OTLP over TLS with the standard OTEL_EXPORTER_OTLP_CERTIFICATE variable."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


def test_grpc_over_tls_with_certificate_from_environment(
    four_gpu_node: SimulatedNode, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    with OtlpGrpcReceiver(tls=(cert.read_bytes(), key.read_bytes())) as receiver:
        assert receiver.endpoint.startswith("https://")
        agent = AgentProcess(
            tmp_path, receiver.endpoint, four_gpu_node.env,
            ["--interval", "0.2", "--export-interval", "0.3"],
            env={"OTEL_EXPORTER_OTLP_INSECURE": "false",
                 "OTEL_EXPORTER_OTLP_CERTIFICATE": str(cert)},
        )
        try:
            point = receiver.store.wait_for(
                lambda s: s.latest("hw.gpu.memory.limit", {"hw.id": UUIDS[0]}), timeout=15)
            assert point.value == 81559 * 1024 * 1024
        finally:
            agent.close()
