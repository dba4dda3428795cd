"""The shipped collector configurations, as they ship, on the collector built from
otel-config/otelcol-builder.yaml: ``otelcol validate`` accepts each, and each starts with no
warning or error in the collector's log (a deprecated component name or field, a removed
processor, a bad value: all are logged at start). Endpoints come from the environment
variables the configurations document, pointing to loopback; k8s_attributes reaches a
Kubernetes API on loopback (tests/receivers/kube_api.py) through a kubeconfig.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.otelcol import (
    CONFIGS,
    Collector,
    collector_binary,
    complaints,
    go_missing,
    validate,
)
from tests.polling import wait_until
from tests.receivers.kube_api import KubeApi
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver

pytestmark = pytest.mark.integration

MANIFEST = CONFIGS / "otelcol-builder.yaml"
KINDS = ("receivers", "processors", "exporters", "extensions")
CONFIG_SETS = {"local.yaml": ("local.yaml",), "gateway.yaml": ("gateway.yaml",),
               "gateway.yaml + gateway-fleet.yaml": ("gateway.yaml", "gateway-fleet.yaml")}


@pytest.fixture(scope="module")
def kube_api() -> Iterator[KubeApi]:
    if missing := go_missing():
        pytest.skip(missing)
    with KubeApi([]) as api:
        yield api


@pytest.fixture(scope="module")
def backends() -> Iterator[tuple[OtlpHttpReceiver, OtlpGrpcReceiver]]:
    """Stand-ins for Mimir and Loki (OTLP/HTTP) and Tempo (OTLP/gRPC, which the exporter
    dials at start: a closed port would be a warning)."""
    with OtlpHttpReceiver() as http, OtlpGrpcReceiver() as grpc:
        yield http, grpc


def collector_env(workdir: Path, kube_api: KubeApi,
                  backends: tuple[OtlpHttpReceiver, OtlpGrpcReceiver]) -> dict[str, str]:
    """Every variable the configurations read, on loopback (free ports, this test's files)."""
    http, grpc = backends
    env = {
        "LISTEN_ADDRESS": "127.0.0.1",
        **{name: str(free_port()) for name in ("OTLP_GRPC_PORT", "OTLP_HTTP_PORT",
                                              "HEALTH_CHECK_PORT", "TELEMETRY_PORT")},
        "MIMIR_OTLP_ENDPOINT": http.endpoint,
        "LOKI_OTLP_ENDPOINT": http.endpoint,
        "TEMPO_OTLP_ENDPOINT": grpc.address, "TEMPO_INSECURE": "true",
        "TENANT": "gpu-test", "CLUSTER_NAME": "test-cluster",
        "QUEUE_DIRECTORY": str(workdir / "queue"),
        "EVENTS_FILE": str(workdir / "events.jsonl"),
        "K8S_AUTH_TYPE": "kubeConfig",
        "KUBECONFIG": str(kube_api.kubeconfig(workdir / "kubeconfig")),
    }
    return env


@pytest.mark.parametrize("name", list(CONFIG_SETS))
def test_the_collector_validates_each_shipped_config(
        name: str, kube_api: KubeApi, backends: tuple[OtlpHttpReceiver, OtlpGrpcReceiver],
        tmp_path: Path) -> None:
    files = [CONFIGS / f for f in CONFIG_SETS[name]]
    done = validate(files, collector_env(tmp_path, kube_api, backends))
    assert done.returncode == 0, done.stdout + done.stderr
    assert complaints(done.stdout + done.stderr) == []


@pytest.mark.parametrize("name", list(CONFIG_SETS))
def test_each_shipped_config_starts_with_no_warning_or_error(
        name: str, kube_api: KubeApi, backends: tuple[OtlpHttpReceiver, OtlpGrpcReceiver],
        tmp_path: Path) -> None:
    files = [CONFIGS / f for f in CONFIG_SETS[name]]
    asked = len(kube_api.requests)
    collector = Collector(tmp_path, files, collector_env(tmp_path, kube_api, backends))
    try:
        collector.wait_ready()
        if "gateway.yaml" in CONFIG_SETS[name]:
            # k8s_attributes has listed and is watching the pods (a failure would be logged).
            wait_until(lambda: any("watch=" in r for r in kube_api.requests[asked:]
                                   if r.startswith("/api/v1/pods")))
        assert complaints(collector.log()) == [], collector.log()
    finally:
        code = collector.close()
    assert code == 0, collector.log()[-3000:]
    assert complaints(collector.log()) == [], collector.log()


def _types_used() -> dict[str, set[str]]:
    """The component types (``otlp_http`` of ``otlp_http/mimir``) the configurations name."""
    used: dict[str, set[str]] = {k: set() for k in KINDS}
    for path in sorted(CONFIGS.glob("*.yaml")):
        if path.name == MANIFEST.name:
            continue
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        for kind in KINDS:
            used[kind] |= {name.split("/")[0] for name in config.get(kind) or {}}
    return used


def test_the_built_collector_has_exactly_the_components_the_configs_use(
        kube_api: KubeApi) -> None:
    """What the binary reports (``otelcol components``), not only what the manifest says:
    every type a configuration names, no other, each from the manifest's module version."""
    done = subprocess.run([str(collector_binary()), "components"], capture_output=True,
                          text=True, timeout=60, check=True)
    built = yaml.safe_load(done.stdout)
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    used = _types_used()
    for kind in KINDS:
        assert {c["name"] for c in built[kind]} == used[kind], kind
        assert {c["module"] for c in built[kind]} == {m["gomod"] for m in manifest[kind]}, kind


def test_a_deprecated_name_is_a_complaint(
        kube_api: KubeApi, backends: tuple[OtlpHttpReceiver, OtlpGrpcReceiver],
        tmp_path: Path) -> None:
    """The check above can fail: the gateway with its Mimir exporter under the deprecated
    alias ``otlphttp`` (what it was named until this release) starts, with a warning."""
    text = (CONFIGS / "gateway.yaml").read_text(encoding="utf-8")
    old = tmp_path / "gateway-otlphttp.yaml"
    old.write_text(text.replace("otlp_http/mimir", "otlphttp/mimir"), encoding="utf-8")
    collector = Collector(tmp_path, [old], collector_env(tmp_path, kube_api, backends))
    try:
        collector.wait_ready()
    finally:
        collector.close()
    assert [line for line in complaints(collector.log()) if '"otlphttp"' in line]
