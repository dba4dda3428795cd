"""The agent's version, reported as ``service.version``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("gpu-otel-agent")
except PackageNotFoundError:  # running from a source tree that was not installed
    VERSION = "0.0.0+source"

# What the agent calls itself on the wire (OTLP over gRPC and HTTP).
USER_AGENT = f"gpu-otel-agent/{VERSION}"
