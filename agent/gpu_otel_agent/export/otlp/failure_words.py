"""An OTLP export failure in words a person can act on: what happened (nothing listens, TLS,
DNS, credentials, a status code) and what to do. ``gpu-agent check`` prints them; the running
agent logs them (``failure_log``), so both say the same thing about the same failure."""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlsplit

from gpu_otel_agent.export.otlp.target import OtlpTarget
from gpu_otel_agent.grpc.status import GrpcError, StatusCode

Problem = tuple[str, str] | None  # what happened, what to do


def tls_words(target: OtlpTarget, text: str) -> Problem:
    lowered = text.lower()
    if "hostname" in lowered and "match" in lowered:
        return ("TLS: the collector's certificate is for another name",
                "use the host name on the certificate in the endpoint, or reissue it")
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered \
            or "unable to get local issuer" in lowered or "self-signed" in lowered \
            or "self signed" in lowered:
        ca = target.certificate or "the system's CA bundle"
        return ("TLS: the collector's certificate is not signed by a CA we trust "
                f"({ca})", "set otlp.certificate / OTEL_EXPORTER_OTLP_CERTIFICATE to the CA "
                "that signed the collector's certificate")
    if "wrong version number" in lowered or ("ssl" in lowered and "handshake" in lowered):
        return ("TLS handshake failed (does the collector speak TLS on this port?)",
                "match TLS on both sides: otlp.insecure / an http:// or https:// endpoint")
    return None


def ssl_words(target: OtlpTarget, error: ssl.SSLError) -> Problem:
    # A failed verification names its reason in ``verify_message`` (a host name mismatch
    # or an unknown issuer); its str() says "certificate verify failed" either way.
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return tls_words(target, f"certificate verify failed: {error.verify_message}")
    return tls_words(target, str(error)) or (f"TLS: {error}", "check the certificates")


def grpc_words(target: OtlpTarget, error: GrpcError, timeout_s: float) -> Problem:
    code, details, cause = error.code, error.details, error.__cause__
    if isinstance(cause, ssl.SSLError):
        return ssl_words(target, cause)
    if isinstance(cause, ConnectionRefusedError):
        return ("nothing listens there (connection refused)",
                "start the collector or fix the endpoint (OTLP/gRPC is usually port 4317)")
    if isinstance(cause, socket.gaierror):
        return (f"cannot resolve the host ({cause})", "check the endpoint's host name")
    if isinstance(cause, TimeoutError) or code is StatusCode.DEADLINE_EXCEEDED:
        return (f"no answer within {timeout_s:g}s", "check the network path (firewall, "
                "network policy) and the collector's load")
    if code is StatusCode.UNAVAILABLE:
        if target.tls:
            return (f"unavailable over TLS ({details})", "if the collector speaks plain "
                    "gRPC, set otlp.insecure: true / OTEL_EXPORTER_OTLP_INSECURE=true")
        return (f"unavailable ({details})", "if the collector speaks TLS, drop otlp.insecure "
                "and set otlp.certificate")
    if code in (StatusCode.UNAUTHENTICATED, StatusCode.PERMISSION_DENIED):
        return (f"the collector refused the credentials ({code.name}: {details})",
                "set otlp.headers / OTEL_EXPORTER_OTLP_HEADERS (chart: otlp.existingSecret)")
    if code is StatusCode.UNIMPLEMENTED:
        return (f"no OTLP {target.signal.lower()} service there",
                "is this the collector's OTLP/gRPC port (4317), with a "
                f"{target.signal.lower()} pipeline? For OTLP/HTTP set otlp.protocol")
    return (f"{code.name}: {details}", "see the collector's log")


def http_error_words(target: OtlpTarget, error: BaseException, timeout_s: float) -> Problem:
    """An OTLP/HTTP exchange that raised: what happened, what to do."""
    # Here, not at the top: only the HTTP transport, which has imported it, calls this; the
    # gRPC path's words need no http.client (0.3 MiB resident with its email modules).
    import http.client

    if isinstance(error, ssl.SSLError):
        return ssl_words(target, error)
    if isinstance(error, ConnectionRefusedError):
        return ("nothing listens there (connection refused)",
                "start the collector or fix the endpoint (OTLP/HTTP is usually port 4318)")
    if isinstance(error, socket.gaierror):
        return (f"cannot resolve the host ({error})", "check the endpoint's host name")
    if isinstance(error, TimeoutError):
        return (f"no answer within {timeout_s:g}s", "check the network path and the "
                "collector's load")
    if isinstance(error, http.client.HTTPException):
        return (f"not an HTTP answer ({type(error).__name__})",
                "is this the collector's OTLP/HTTP port (4318)?")
    if isinstance(error, OSError):
        return (f"{error.strerror or error}", "check the endpoint's host and port")
    return (f"{type(error).__name__}: {error}", "see the agent's debug log")


def http_status_words(target: OtlpTarget, status: int) -> Problem:
    """An OTLP/HTTP answer that is not 2xx: what it means, what to do."""
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return (f"HTTP {status}: the collector refused the credentials",
                "set otlp.headers / OTEL_EXPORTER_OTLP_HEADERS (chart: otlp.existingSecret)")
    if status == 404:
        return (f"HTTP 404 for {urlsplit(target.endpoint).path}", "the endpoint is the "
                "collector's base URL; the agent appends /v1/metrics and /v1/logs")
    return (f"HTTP {status}", "see the collector's log")
