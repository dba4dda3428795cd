"""The HTTP endpoint for real: TLS, bcrypt basic auth, web-config reload, health and ready."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import http.client
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import AgentConfig, PrometheusConfig
from gpu_otel_agent.export.prometheus.probes import HealthCheck
from gpu_otel_agent.export.prometheus.server import EndpointError, MetricsEndpoint
from gpu_otel_agent.export.prometheus.webconfig import WebConfigError, load_web_config
from gpu_otel_agent.model.snapshot import HealthState, SnapshotStore
from tests.unit.export.prometheus.snapshots import device, store_with
from tests.unit.export.prometheus.test_negotiation import PROMETHEUS_2 as PROMETHEUS_ACCEPT

RESOURCE = {"service.name": "gpu-otel-agent", "host.name": "vm-1"}


def config(**prometheus: object) -> AgentConfig:
    base = load(None, environ={})
    fields: dict[str, object] = {"enabled": True, "listen": "127.0.0.1:0", **prometheus}
    settings = dataclasses.replace(base.prometheus, **fields)  # type: ignore[arg-type]
    return dataclasses.replace(base, prometheus=settings)


class Clock:
    def __init__(self) -> None:
        self.now = time.time_ns()

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def start() -> Iterator[Callable[..., MetricsEndpoint]]:
    started: list[MetricsEndpoint] = []

    def make(store: SnapshotStore, cfg: AgentConfig, devices: int = 2,
             clock: Callable[[], int] = time.time_ns) -> MetricsEndpoint:
        health = HealthCheck(store, devices, lambda: cfg, clock)
        endpoint = MetricsEndpoint(lambda: cfg, store, RESOURCE, health)
        endpoint.start()
        started.append(endpoint)
        return endpoint

    yield make
    for endpoint in started:
        endpoint.stop()


def get(url: str, auth: tuple[str, str] | None = None,
        context: ssl.SSLContext | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def base_url(endpoint: MetricsEndpoint, scheme: str = "http") -> str:
    host, port = endpoint.address
    return f"{scheme}://{'localhost' if scheme == 'https' else host}:{port}"


def test_ready_only_after_every_gpu_is_sampled(start: Callable[..., MetricsEndpoint]) -> None:
    store = SnapshotStore()
    endpoint = start(store, config())
    url = base_url(endpoint)
    status, body, _ = get(url + "/readyz")
    assert (status, body) == (503, "waiting for the first sample of every GPU\n")
    store.put(device(0, 0.3, 100, time.time_ns()))
    assert get(url + "/readyz")[0] == 503  # one of two GPUs
    store.put(device(1, 0.3, 100, time.time_ns(), health=HealthState.FAILED))
    assert get(url + "/readyz")[:2] == (200, "ready\n")


def test_unhealthy_when_sampling_stalls_but_not_for_a_lost_gpu(
    start: Callable[..., MetricsEndpoint],
) -> None:
    clock = Clock()
    store = store_with(device(0, 0.3, 100, clock.now),
                       device(1, 0.3, 100, clock.now, health=HealthState.FAILED))
    endpoint = start(store, config(stall_after=5.0), clock=clock)
    url = base_url(endpoint)
    assert get(url + "/healthz")[:2] == (200, "ok\n")
    clock.now += 4_000_000_000
    assert get(url + "/healthz")[0] == 200
    clock.now += 2_000_000_000  # GPU 0's newest sample is now 6 s old; GPU 1 is lost anyway
    status, body, _ = get(url + "/healthz")
    assert status == 503
    assert body == "sampling stalled: gpu 0: no sample for 6.0s\n"
    store.put(device(0, 0.3, 100, clock.now))
    assert get(url + "/healthz")[0] == 200


def test_metrics_over_plain_http_by_default(start: Callable[..., MetricsEndpoint]) -> None:
    store = store_with(device(0, 0.37, 100, time.time_ns()))
    endpoint = start(store, config(), devices=1)
    status, body, headers = get(base_url(endpoint) + "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(body)}
    assert {"hw_gpu_utilization_ratio", "target_info", "hw_status"} <= names


def _fetch(endpoint: MetricsEndpoint, headers: dict[str, str],
           method: str = "GET") -> tuple[int, bytes, dict[str, str]]:
    host, port = endpoint.address
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request(method, "/metrics", headers=headers)
        response = connection.getresponse()
        return response.status, response.read(), dict(response.headers)
    finally:
        connection.close()


@pytest.mark.parametrize("scheme", ["otel", "dcgm"])
def test_gzip_and_openmetrics_when_the_scraper_asks_for_them(
    start: Callable[..., MetricsEndpoint], scheme: str,
) -> None:
    store = store_with(device(0, 0.37, 100, time.time_ns()))
    endpoint = start(store, config(scheme=scheme), devices=1)
    _, plain, headers = _fetch(endpoint, {})
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "Content-Encoding" not in headers
    status, body, headers = _fetch(endpoint, {"Accept": PROMETHEUS_ACCEPT,
                                              "Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert headers["Content-Encoding"] == "gzip"
    assert headers["Vary"] == "Accept, Accept-Encoding"
    assert int(headers["Content-Length"]) == len(body) < len(plain)
    openmetrics = gzip.decompress(body).decode()
    assert openmetrics.endswith("# EOF\n")
    om_names = {s.name for f in openmetrics_families(openmetrics) for s in f.samples}
    text_names = {line.split("{")[0].split(" ")[0] for line in plain.decode().splitlines()
                  if line and not line.startswith("#")}
    assert om_names == text_names  # names as stored by Prometheus do not change
    _, zipped_text, headers = _fetch(endpoint, {"Accept-Encoding": "gzip"})
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert {f.name for f in text_string_to_metric_families(gzip.decompress(
        zipped_text).decode())} == {f.name for f in text_string_to_metric_families(
            plain.decode())}
    status, head_body, headers = _fetch(endpoint, {"Accept-Encoding": "gzip"}, "HEAD")
    assert (status, head_body, headers["Content-Encoding"]) == (200, b"", "gzip")
    assert endpoint.stats.gzip == 3 and endpoint.stats.openmetrics == 1


def test_dcgm_scheme_from_configuration(start: Callable[..., MetricsEndpoint]) -> None:
    store = store_with(device(0, 0.37, 100, time.time_ns()))
    endpoint = start(store, config(scheme="dcgm"), devices=1)
    body = get(base_url(endpoint) + "/metrics")[1]
    # Parsed, not matched as text: prometheus_client writes labels sorted by name.
    families = {f.name: f for f in text_string_to_metric_families(body)}
    (sample,) = families["DCGM_FI_DEV_GPU_UTIL"].samples
    assert sample.labels["gpu"] == "0"
    assert "hw_gpu_utilization_ratio" not in families


def _self_signed(directory: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(directory / "key.pem"), "-out", str(directory / "cert.pem")],
        check=True, capture_output=True,
    )


def _hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode().replace("$2b$", "$2y$")


def test_tls_and_bcrypt_basic_auth_as_exporter_toolkit_configures_them(
    start: Callable[..., MetricsEndpoint], tmp_path: Path,
) -> None:
    _self_signed(tmp_path)
    web = tmp_path / "web.yaml"
    web.write_text(
        "tls_server_config: {cert_file: cert.pem, key_file: key.pem}\n"  # relative to the file
        "http_server_config: {headers: {X-Frame-Options: deny}}\n"
        f"basic_auth_users: {{prometheus: '{_hash('s3cret')}'}}\n", encoding="utf-8")
    store = store_with(device(0, 0.37, 100, time.time_ns()))
    endpoint = start(store, config(web_config_file=str(web)), devices=1)
    trusted = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    url = base_url(endpoint, "https")

    status, _, headers = get(url + "/metrics", context=trusted)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert get(url + "/metrics", ("prometheus", "wrong"), trusted)[0] == 401
    assert get(url + "/metrics", ("nobody", "s3cret"), trusted)[0] == 401
    status, body, headers = get(url + "/metrics", ("prometheus", "s3cret"), trusted)
    assert status == 200 and "hw_gpu_utilization_ratio" in body
    assert headers["X-Frame-Options"] == "deny"
    assert get(url + "/readyz", context=trusted)[0] == 200  # probes need no credentials
    with pytest.raises(OSError):  # reset or refused: never served in clear text
        get(base_url(endpoint) + "/metrics", ("prometheus", "s3cret"))  # plain HTTP refused

    # A changed file applies to the next connection (password rotation without a restart).
    web.write_text(web.read_text().replace("prometheus:", "scraper:"), encoding="utf-8")
    future = time.time() + 5

    os.utime(web, (future, future))
    assert get(url + "/metrics", ("prometheus", "s3cret"), trusted)[0] == 401
    assert get(url + "/metrics", ("scraper", "s3cret"), trusted)[0] == 200


@pytest.mark.parametrize(("text", "message"), [
    ("tls_server_config: {cert_file: a.pem}\n", "cert_file and key_file go together"),
    ("basic_auth_users: {u: plaintext}\n", "basic_auth_users.u: expected a bcrypt hash"),
    ("tls_server_config: {cert_file: a, key_file: b, client_auth_type: RequireAnyClientCert}\n",
     "not verified) is not supported"),
    ("tls_server_config: {cert_file: a, key_file: b, cipher_suites: [x]}\n",
     "tls_server_config.cipher_suites: not supported"),
    ("basic_auth: {}\n", "basic_auth: unknown key"),
    ("tls_server_config: {cert_file: missing.pem, key_file: missing.key}\n",
     "cannot load certificates"),
    ("tls_server_config: {cert_file: a, key_file: b, min_version: TLS99}\n",
     "unknown 'TLS99'"),
    # Every response carries these headers: one that cannot be sent would fail every answer.
    ("http_server_config: {headers: {X-Note: \"caf\\u00e9 \\u2019\"}}\n",
     "http_server_config.headers.X-Note: the value must be printable ISO-8859-1 text"),
    ("http_server_config: {headers: {X-Note: \"a\\r\\nSet-Cookie: x=1\"}}\n",
     "http_server_config.headers.X-Note: the value must be printable ISO-8859-1 text"),
    ("http_server_config: {headers: {\"X Note\": a}}\n",
     "http_server_config.headers: 'X Note' is not a header name"),
])
def test_bad_web_config_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    web = tmp_path / "web.yaml"
    web.write_text(text, encoding="utf-8")
    with pytest.raises(WebConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_web_config(web)


def test_endpoint_refuses_to_start_with_a_bad_web_config_or_a_taken_port(
    start: Callable[..., MetricsEndpoint], tmp_path: Path,
) -> None:
    web = tmp_path / "web.yaml"
    web.write_text("basic_auth_users: {u: nothash}\n", encoding="utf-8")
    with pytest.raises(EndpointError, match=r"prometheus\.web_config_file"):
        start(SnapshotStore(), config(web_config_file=str(web)))
    first = start(SnapshotStore(), config())
    host, port = first.address
    with pytest.raises(EndpointError, match="cannot listen"):
        start(SnapshotStore(), config(listen=f"{host}:{port}"))


def test_configuration_keys_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("prometheus: {enabled: true, listen: '[::]:9500', scheme: dcgm}\n",
                    encoding="utf-8")
    assert load(path, environ={}).prometheus == PrometheusConfig(
        enabled=True, listen="[::]:9500", scheme="dcgm")
    env = {"GPU_AGENT_PROMETHEUS_ENABLED": "true", "GPU_AGENT_PROMETHEUS_LISTEN": "0.0.0.0:9999"}
    assert load(None, environ=env).prometheus.listen == "0.0.0.0:9999"
    for bad, message in [("{listen: 'nine'}", "expected host:port"),
                         ("{scheme: prom}", "must be one of otel, dcgm"),
                         ("{enabled: maybe}", "expected true or false"),
                         ("{port: 1}", "prometheus.port in .*: unknown key")]:
        path.write_text(f"prometheus: {bad}\n", encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            load(path, environ={})


def test_a_revoked_user_is_refused_on_a_kept_alive_connection(
    start: Callable[..., MetricsEndpoint], tmp_path: Path,
) -> None:
    # Prometheus keeps its connection open between scrapes (idle timeout > scrape interval), so
    # a user removed from the web config must be refused on that same connection, not only on
    # the next one, which may never come.
    web = tmp_path / "web.yaml"
    web.write_text(f"basic_auth_users: {{prometheus: '{_hash('s3cret')}'}}\n", encoding="utf-8")
    store = store_with(device(0, 0.37, 100, time.time_ns()))
    endpoint = start(store, config(web_config_file=str(web)), devices=1)
    host, port = endpoint.address
    token = base64.b64encode(b"prometheus:s3cret").decode()
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        def scrape() -> int:
            connection.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
            response = connection.getresponse()
            response.read()
            return response.status

        assert scrape() == 200
        sock = connection.sock
        web.write_text(f"basic_auth_users: {{scraper: '{_hash('s3cret')}'}}\n",
                       encoding="utf-8")
        future = time.time() + 5
        os.utime(web, (future, future))
        assert scrape() == 401
        assert connection.sock is sock  # the same connection: the server did not close it
    finally:
        connection.close()
