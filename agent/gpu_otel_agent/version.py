"""The agent's version, reported as ``service.version``."""

from __future__ import annotations

from gpu_otel_agent.distributions import NotInstalled, version_of

try:
    VERSION = version_of("gpu-otel-agent")
except NotInstalled:  # running from a source tree that was not installed
    VERSION = "0.0.0+source"

# What the agent calls itself on the wire (OTLP over gRPC and HTTP).
USER_AGENT = f"gpu-otel-agent/{VERSION}"
