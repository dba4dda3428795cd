"""An event pusher run against a real collector for the length of a scenario, and the OTLP/gRPC
event sender the tests point at a receiver: shared by the refusal, oversized-record and
spool-link tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.senders import OtlpEventSender
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.export.otlp.senders import build_request_sender
from gpu_otel_agent.export.otlp.target import resolve_target


def grpc_event_sender(endpoint: str, timeout_s: int) -> OtlpEventSender:
    """The agent's own event sender, OTLP/gRPC to ``endpoint``, configured as from the
    environment."""
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
               "OTEL_EXPORTER_OTLP_TIMEOUT": str(timeout_s)}
    return OtlpEventSender(build_request_sender(resolve_target(
        load(None, environ={}), environ, "LOGS")), LogEncoder(Resource.create({})))


def run_pusher(sender: OtlpEventSender, spool_dir: Path,
               scenario: Callable[[EventPusher], None],
               spool_bytes: int = 1 << 20) -> EventPusher:
    """A pusher on its own loop while ``scenario`` runs on a thread, then closed."""
    async def main() -> EventPusher:
        pusher = EventPusher(sender, Spool(spool_dir, spool_bytes), retry=0.05)
        task = asyncio.create_task(pusher.run())
        try:
            await asyncio.to_thread(scenario, pusher)
        finally:
            task.cancel()
            pusher.close([], timeout=2.0)
        return pusher

    return asyncio.run(main())
