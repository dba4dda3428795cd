"""The HTTP endpoint: ``/metrics``, ``/healthz``, ``/readyz``, on threads of its own.

Scrapes never touch a GPU library and never run on the event loop: a handler thread takes
the current snapshot and encodes it, so a slow scraper or a hung GPU cannot delay sampling
or each other. TLS is negotiated in the connection's own thread, and the web configuration
file is re-read when it changes (certificate rotation without a restart), as exporter-toolkit
does.

``/healthz`` and ``/readyz`` need no credentials: the kubelet's probes cannot send them, and
they reveal nothing but the answer.
"""

from __future__ import annotations

import base64
import binascii
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.prometheus import EndpointError
from gpu_otel_agent.export.prometheus.dcgm_scheme import DcgmTranslator
from gpu_otel_agent.export.prometheus.exposition import CONTENT_TYPE, render
from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
from gpu_otel_agent.export.prometheus.probes import HealthCheck
from gpu_otel_agent.export.prometheus.webconfig import BasicAuth, WebConfig, load_web_config
from gpu_otel_agent.export.series import series
from gpu_otel_agent.export.tracing import NoTracing, SpanRecorder
from gpu_otel_agent.model.snapshot import Reading, SnapshotStore

__all__ = ["EndpointError", "MetricsEndpoint"]
log = logging.getLogger(__name__)
CONNECTION_TIMEOUT_SECONDS = 10.0
LANDING = b"""<html><head><title>gpu-otel-agent</title></head><body>
<h1>gpu-otel-agent</h1><p><a href="/metrics">Metrics</a> &middot;
<a href="/healthz">healthz</a> &middot; <a href="/readyz">readyz</a></p></body></html>
"""


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass
class ServerStats:
    scrapes: int = 0
    unauthorized: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, what: str) -> None:
        with self.lock:
            setattr(self, what, getattr(self, what) + 1)


class _WebConfigWatch:
    """The web config, re-read when its file changes; a bad new file keeps the old one."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._mtime: float | None = None
        self.config = WebConfig()
        self.context: ssl.SSLContext | None = None
        self.auth = BasicAuth({})
        if path is not None:
            self._apply(load_web_config(path), _mtime(path))

    def _apply(self, config: WebConfig, mtime: float | None) -> None:
        self.config = config
        self.context = config.tls.context() if config.tls is not None else None
        self.auth = BasicAuth(config.users)
        self._mtime = mtime

    def refresh(self) -> None:
        if self._path is None:
            return
        mtime = _mtime(self._path)
        with self._lock:
            if mtime == self._mtime:
                return
            try:
                self._apply(load_web_config(self._path), mtime)
                log.info("web config %s reloaded", self._path)
            except Exception as error:
                self._mtime = mtime  # say it once per change, not per connection
                log.error("web config %s rejected, keeping the previous one: %s",
                          self._path, error)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    endpoint: MetricsEndpoint

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(CONNECTION_TIMEOUT_SECONDS)
        watch = self.endpoint.web
        watch.refresh()
        context = watch.context
        if context is not None:
            try:
                request = context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as error:
                log.debug("TLS handshake with %s failed: %s", client_address, error)
                return
        super().finish_request(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        endpoint = self.server.endpoint
        path = self.path.split("?", 1)[0]
        if path in ("/healthz", "/readyz"):
            verdict = endpoint.health.healthy() if path == "/healthz" else \
                endpoint.health.ready()
            self._send(200 if verdict.ok else 503, (verdict.reason + "\n").encode(),
                       "text/plain; charset=utf-8")
            return
        if not self._authorized(endpoint):
            return
        if path == "/metrics":
            body = endpoint.scrape()
            self._send(200, body, CONTENT_TYPE)
        elif path == "/":
            self._send(200, LANDING, "text/html; charset=utf-8")
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _authorized(self, endpoint: MetricsEndpoint) -> bool:
        auth = endpoint.web.auth
        if not auth.enabled:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, sep, password = base64.b64decode(encoded, validate=True).decode(
                    "utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                sep = ""
            if sep and auth.check(user, password):
                return True
        endpoint.stats.count("unauthorized")
        self._send(401, b"Unauthorized\n", "text/plain; charset=utf-8",
                   {"WWW-Authenticate": 'Basic realm="gpu-otel-agent"'})
        return False

    def _send(self, status: int, body: bytes, content_type: str,
              extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**self.server.endpoint.web.config.headers, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # http.server dispatches by name
        self.do_GET()


class MetricsEndpoint:
    def __init__(
        self,
        config: Callable[[], AgentConfig],
        store: SnapshotStore,
        resource: Mapping[str, object],
        health: HealthCheck,
        tracer: SpanRecorder | None = None,
    ) -> None:
        self._config = config
        self._tracer: SpanRecorder = tracer or NoTracing()
        self._store = store
        self._resource = dict(resource)
        self._dcgm = DcgmTranslator(self._resource)
        self.health = health
        self.stats = ServerStats()
        settings = config().prometheus
        path = settings.web_config_file
        try:
            self.web = _WebConfigWatch(Path(path) if path else None)
        except Exception as error:
            raise EndpointError(f"prometheus.web_config_file: {error}") from error
        self._listen = settings.listen
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._server is None:
            raise RuntimeError("endpoint not started")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        host, port = split_listen(self._listen)
        server_class = _Server6 if ":" in host else _Server
        try:
            server = server_class((host, port), _Handler, bind_and_activate=True)
        except OSError as error:
            raise EndpointError(f"prometheus.listen {self._listen}: cannot listen: "
                                f"{error.strerror or error}") from error
        server.endpoint = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={
            "poll_interval": 0.25}, name="prometheus-http", daemon=True)
        self._thread.start()
        scheme = "https" if self.web.context is not None else "http"
        log.info("prometheus endpoint on %s://%s/metrics (scheme %s%s)", scheme, self._listen,
                 self._config().prometheus.scheme,
                 ", basic auth" if self.web.auth.enabled else "")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def scrape(self) -> bytes:
        self.stats.count("scrapes")
        scheme = self._config().prometheus.scheme
        with self._tracer.span("gpu_agent.scrape", {"gpu_agent.scheme": scheme}) as span:
            snapshot = self._store.current(time.time_ns())
            points = series(snapshot)
            if scheme == "dcgm":
                body = render(self._dcgm.families(points))
            else:
                body = render(otel_families(points, self._resource))
            if span is not None:
                span.set_attribute("gpu_agent.scrape.bytes", len(body))
            return body

    def readings(self) -> tuple[Reading, ...]:
        """Self-telemetry of the endpoint."""
        return (Reading("gpu_agent.scrapes", self.stats.scrapes),)
