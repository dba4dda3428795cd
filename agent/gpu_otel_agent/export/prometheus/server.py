"""The HTTP endpoint: ``/metrics``, ``/healthz``, ``/readyz``, off the agent's event loop.

Scrapes never touch a GPU library and never run on the agent's event loop: the endpoint's own
loop thread handles the connections and a small fixed pool of threads takes the current
snapshot and encodes it (``http_server/connections.py``), so a slow scraper, a flood of idle
clients or a hung GPU cannot delay sampling or each other. TLS is negotiated per connection with the
context of the moment, and the web configuration file is re-read when it changes (certificate
rotation without a restart; users and headers apply from the next request, also on a kept-alive
connection), as exporter-toolkit does.

``/metrics`` speaks what the scraper asks for (``negotiation.py``): OpenMetrics 1.0.0 where the
``Accept`` header prefers it (Prometheus's does), text 0.0.4 otherwise, gzip-compressed when
``Accept-Encoding`` allows (a 16-GPU node's text is hundreds of kilobytes; gzip makes it a
tenth).

``/healthz`` and ``/readyz`` need no credentials: the kubelet's probes cannot send them, and
they reveal nothing but the answer. They are answered on the endpoint's loop thread, before
any worker is asked, and so is every request whose credentials were verified before; only a
credential never seen waits for bcrypt, on a thread of its own, a few at a time (``triage``,
``check``; ``http_server/connections.py``): password guesses cannot starve the probes or
Prometheus (issue 39).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.metrics.tracing import NoTracing, SpanRecorder
from gpu_otel_agent.export.prometheus import EndpointError
from gpu_otel_agent.export.prometheus.dcgm_scheme import (
    CURRENT,
    SCHEME,
    SCHEME_49,
    DcgmTranslator,
)
from gpu_otel_agent.export.prometheus.exposition import Families, render
from gpu_otel_agent.export.prometheus.negotiation import Format, accepts_gzip, choose_format
from gpu_otel_agent.export.prometheus.openmetrics import render_openmetrics
from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
from gpu_otel_agent.export.prometheus.probes import HealthCheck
from gpu_otel_agent.export.prometheus.webconfig import BasicAuth, WebConfig, load_web_config
from gpu_otel_agent.http_server.connections import HttpServer, Limits, Request, Response
from gpu_otel_agent.model.snapshot import Reading, SnapshotStore

__all__ = ["EndpointError", "Limits", "MetricsEndpoint"]
log = logging.getLogger(__name__)
# Level 1: a 16-GPU scrape compresses about as well as at the default level 6 (text repeats
# itself) in a fraction of the CPU; Prometheus scrapes every few seconds.
GZIP_LEVEL = 1
PLAIN = "text/plain; charset=utf-8"
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
    gzip: int = 0
    openmetrics: int = 0
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


def _credentials(request: Request) -> tuple[str, str] | None:
    """User and password of ``Authorization: Basic``; None when absent or malformed."""
    scheme, _, encoded = (request.header("authorization") or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode(
            "utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


class MetricsEndpoint:
    def __init__(
        self,
        config: Callable[[], AgentConfig],
        store: SnapshotStore,
        resource: Mapping[str, object],
        health: HealthCheck,
        tracer: SpanRecorder | None = None,
        *,
        limits: Limits | None = None,
    ) -> None:
        self._config = config
        self._tracer: SpanRecorder = tracer or NoTracing()
        self._store = store
        self._resource = dict(resource)
        self._dcgm = DcgmTranslator(self._resource, config().prometheus.dcgm_exporter_version)
        self.health = health
        self.stats = ServerStats()
        settings = config().prometheus
        path = settings.web_config_file
        try:
            self.web = _WebConfigWatch(Path(path) if path else None)
        except Exception as error:
            raise EndpointError(f"prometheus.web_config_file: {error}") from error
        self._listen = settings.listen
        self._limits = limits or Limits()
        self._server: HttpServer | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._server is None:
            raise RuntimeError("endpoint not started")
        return self._server.address

    @property
    def server(self) -> HttpServer:
        if self._server is None:
            raise RuntimeError("endpoint not started")
        return self._server

    def start(self) -> None:
        host, port = split_listen(self._listen)
        try:
            sock = socket.create_server(
                (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                backlog=socket.SOMAXCONN)
        except OSError as error:
            raise EndpointError(f"prometheus.listen {self._listen}: cannot listen: "
                                f"{error.strerror or error}") from error
        server = HttpServer(sock, self._route, self._tls, lambda: self.web.config.headers,
                            self._limits, triage=self.triage, check=self.check)
        try:
            server.start()
        except OSError as error:
            sock.close()
            raise EndpointError(f"prometheus.listen {self._listen}: {error}") from error
        self._server = server
        scheme = "https" if self.web.context is not None else "http"
        log.info("prometheus endpoint on %s://%s/metrics (scheme %s%s)", scheme, self._listen,
                 self._config().prometheus.scheme,
                 ", basic auth" if self.web.auth.enabled else "")

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def _tls(self) -> ssl.SSLContext | None:
        self.web.refresh()
        return self.web.context

    def handle(self, request: Request) -> Response:
        """One request, start to end, on the caller's thread (what the server does in
        three steps: ``triage``, ``check``, ``_route``)."""
        verdict = self.triage(request)
        if isinstance(verdict, Response):
            return verdict
        if not verdict:
            refusal = self.check(request)
            if refusal is not None:
                return refusal
        return self._route(request)

    def triage(self, request: Request) -> Response | bool:
        """On the server's loop thread, so nothing slow: a probe's answer, a refusal of a
        missing or malformed credential, True for a request that needs no check (no users,
        or credentials verified before), False for one that needs bcrypt (``check``)."""
        # Per request, not only per connection: Prometheus keeps its connection open across
        # scrapes, so a user removed from the web config must be refused on it too.
        self.web.refresh()
        path = request.path
        if path in ("/healthz", "/readyz"):
            verdict = self.health.healthy() if path == "/healthz" else self.health.ready()
            return Response(200 if verdict.ok else 503, (verdict.reason + "\n").encode())
        auth = self.web.auth
        if not auth.enabled:
            return True
        credentials = _credentials(request)
        if credentials is None:
            return self._unauthorized()
        return auth.known(*credentials)

    def check(self, request: Request) -> Response | None:
        """A credential not verified before, on the server's checking thread (bcrypt)."""
        credentials = _credentials(request)
        if credentials is None or not self.web.auth.check(*credentials):
            return self._unauthorized()
        return None

    def _unauthorized(self) -> Response:
        self.stats.count("unauthorized")
        return Response(401, b"Unauthorized\n",
                        headers=(("WWW-Authenticate", 'Basic realm="gpu-otel-agent"'),))

    def _route(self, request: Request) -> Response:
        """An authorised request, in a worker thread."""
        path = request.path
        if path == "/metrics":
            return self._metrics(request)
        if path == "/":
            return Response(200, LANDING, "text/html; charset=utf-8")
        return Response(404, b"not found\n")


    def _metrics(self, request: Request) -> Response:
        format_ = choose_format(request.header("accept"))
        body = self.scrape(format_)
        vary = (("Vary", "Accept, Accept-Encoding"),)
        if format_ is Format.OPENMETRICS:
            self.stats.count("openmetrics")
        if accepts_gzip(request.header("accept-encoding")):
            self.stats.count("gzip")
            return Response(200, gzip.compress(body, GZIP_LEVEL, mtime=0), format_.content_type,
                            (("Content-Encoding", "gzip"), *vary))
        return Response(200, body, format_.content_type, vary)

    def scrape(self, format_: Format = Format.TEXT) -> bytes:
        self.stats.count("scrapes")
        scheme = self._config().prometheus.scheme
        with self._tracer.span("gpu_agent.scrape", {"gpu_agent.scheme": scheme}) as span:
            snapshot = self._store.current(time.time_ns())
            points = series(snapshot)
            families: Families = (
                self._translator(scheme).families(points) if scheme in (SCHEME, SCHEME_49)
                else otel_families(points, self._resource))
            body = render_openmetrics(families) if format_ is Format.OPENMETRICS \
                else render(families)
            if span is not None:
                span.set_attribute("gpu_agent.scrape.bytes", len(body))
            return body

    def _translator(self, scheme: str) -> DcgmTranslator:
        """A ``dcgm`` scheme: <= 4.8's names for the configured dcgm-exporter release (a live
        key), or >= 4.9's with the latest release's labels."""
        renamed = scheme == SCHEME_49
        version = CURRENT if renamed else self._config().prometheus.dcgm_exporter_version
        if self._dcgm.version != version or self._dcgm.renamed != renamed:
            self._dcgm = DcgmTranslator(self._resource, version, renamed=renamed)
        return self._dcgm

    def readings(self) -> tuple[Reading, ...]:
        """Self-telemetry of the endpoint."""
        return (Reading("gpu_agent.scrapes", self.stats.scrapes),)
