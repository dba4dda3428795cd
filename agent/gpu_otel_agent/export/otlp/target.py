"""Where and how one OTLP signal is sent, resolved once from the environment and the file.

The agent sends OTLP itself (see ``otlp.senders``), so it reads the standard variables itself, as
every OpenTelemetry SDK does: for signal S (METRICS, LOGS) ``OTEL_EXPORTER_OTLP_S_<NAME>``
wins over ``OTEL_EXPORTER_OTLP_<NAME>``, which wins over the ``otlp`` section of the file,
which wins over the defaults. The values mean what they mean to the Python SDK, which the
agent used before and whose behaviour users already rely on: the timeout is in seconds, a
gRPC endpoint's scheme chooses TLS (``http`` plain, ``https`` TLS, none: TLS unless
insecure), and an HTTP endpoint from the generic variable or the file is a base URL that gets
``/v1/<signal>`` appended. ``tests/unit/export/otlp/test_otlp_transport.py`` checks this against the
SDK's own exporters, sending to the same receiver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlparse

from gpu_otel_agent.config.kinds import endpoint_problem
from gpu_otel_agent.config.schema import AgentConfig

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"
OtlpProtocol = Literal["grpc", "http/protobuf"]
Compression = Literal["gzip", "deflate"]
_PROTOCOLS: dict[str, OtlpProtocol] = {"grpc": "grpc", "http/protobuf": "http/protobuf"}
_COMPRESSIONS: dict[str, Compression] = {"gzip": "gzip", "deflate": "deflate"}


class ExporterConfigError(ValueError):
    pass


@dataclass(frozen=True)
class OtlpTarget:
    """Everything a transport needs for one signal; built by ``resolve_target``."""

    protocol: OtlpProtocol
    signal: str  # METRICS or LOGS, as in the variable names
    endpoint: str  # gRPC: host:port; HTTP: the full URL of the signal's path
    tls: bool  # gRPC only; HTTP follows the URL's scheme
    headers: tuple[tuple[str, str], ...]
    timeout_s: float
    compression: Compression | None
    certificate: str | None  # CA bundle (PEM) that verifies the collector
    client_key: str | None  # mutual TLS
    client_certificate: str | None


def otlp_protocol(
    config: AgentConfig, environ: Mapping[str, str], signal: str = "METRICS"
) -> OtlpProtocol:
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = environ.get(name)
        if value:
            if value in _PROTOCOLS:
                return _PROTOCOLS[value]
            raise ExporterConfigError(
                f"environment variable {name}: protocol {value!r} is not supported "
                "(use grpc or http/protobuf)"
            )
    return "http/protobuf" if config.otlp.protocol == "http/protobuf" else "grpc"


class _Lookup:
    """The signal's variable, else the generic one; remembers which name gave the value."""

    def __init__(self, environ: Mapping[str, str], signal: str) -> None:
        self._environ = environ
        self._signal = signal

    def get(self, name: str) -> tuple[str, str] | None:
        for variable in (f"OTEL_EXPORTER_OTLP_{self._signal}_{name}",
                         f"OTEL_EXPORTER_OTLP_{name}"):
            value = self._environ.get(variable, "").strip()
            if value:
                return variable, value
        return None


def _timeout(lookup: _Lookup, configured: float | None) -> float:
    found = lookup.get("TIMEOUT")
    if found is None:
        return DEFAULT_TIMEOUT_S if configured is None else configured
    variable, raw = found
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ExporterConfigError(
            f"environment variable {variable}: timeout {raw!r} is not a positive number "
            "of seconds")
    return value


def _compression(
    lookup: _Lookup, configured: str | None, protocol: OtlpProtocol
) -> Compression | None:
    found = lookup.get("COMPRESSION")
    variable, raw = found if found is not None else ("otlp.compression", configured or "none")
    value = raw.strip().lower()
    allowed = ("gzip", "none") if protocol == "grpc" else ("gzip", "deflate", "none")
    if value not in allowed:
        raise ExporterConfigError(
            f"{variable}: compression {raw!r} is not supported over {protocol} "
            f"(use {' or '.join(allowed)})")
    return _COMPRESSIONS.get(value)


def _headers(lookup: _Lookup, configured: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    found = lookup.get("HEADERS")
    if not found:
        pairs = dict(configured)
    else:
        # Imported only when the variable is set: the module brings typing_extensions, 0.6 MiB
        # resident the default path does not need (issue 41).
        from opentelemetry.util.re import parse_env_headers

        pairs = dict(parse_env_headers(found[1], liberal=True))
    # gRPC metadata keys must be lower case; HTTP header names are case-insensitive.
    return tuple((key.lower(), value) for key, value in pairs.items())


def _grpc_endpoint(endpoint: str, insecure: bool | None) -> tuple[str, bool]:
    """(host:port, TLS?) as the SDK's gRPC exporter decides it."""
    parsed = urlparse(endpoint)
    if parsed.scheme == "https":
        tls = True
    elif insecure is not None:
        tls = not insecure
    else:
        tls = parsed.scheme != "http"
    return (parsed.netloc or endpoint), tls


def resolve_target(
    config: AgentConfig, environ: Mapping[str, str], signal: str = "METRICS"
) -> OtlpTarget:
    otlp = config.otlp
    protocol = otlp_protocol(config, environ, signal)
    lookup = _Lookup(environ, signal)
    path = f"/v1/{signal.lower()}"
    own = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip()
    generic = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    for variable, value in ((f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", own),
                            ("OTEL_EXPORTER_OTLP_ENDPOINT", generic)):
        problem = endpoint_problem(value) if value else None
        if problem is not None:  # refused now, not reported later as a TLS or DNS failure
            raise ExporterConfigError(f"environment variable {variable}: {problem}")
    default = DEFAULT_GRPC_ENDPOINT if protocol == "grpc" else DEFAULT_HTTP_ENDPOINT
    base = generic or otlp.endpoint or default
    tls = False
    if protocol == "grpc":
        insecure_var = lookup.get("INSECURE")
        insecure = (insecure_var[1].lower() == "true") if insecure_var else otlp.insecure
        endpoint, tls = _grpc_endpoint(own or base, insecure)
    elif own:
        endpoint = own  # the signal's own variable is the full URL, used as given
    else:
        base = base.rstrip("/")
        endpoint = base if base.endswith(path) else base + path
    certificate = lookup.get("CERTIFICATE")
    client_key = lookup.get("CLIENT_KEY")
    client_certificate = lookup.get("CLIENT_CERTIFICATE")
    return OtlpTarget(
        protocol=protocol,
        signal=signal,
        endpoint=endpoint,
        tls=tls,
        headers=_headers(lookup, otlp.headers),
        timeout_s=_timeout(lookup, otlp.timeout),
        compression=_compression(lookup, otlp.compression, protocol),
        certificate=certificate[1] if certificate else otlp.certificate,
        client_key=client_key[1] if client_key else None,
        client_certificate=client_certificate[1] if client_certificate else None,
    )
