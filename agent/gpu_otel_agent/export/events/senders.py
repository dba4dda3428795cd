"""Where health events go: OTLP logs (gRPC or HTTP, same settings as the metrics) or stdout
(a line per event, or JSON).

Events are encoded by ``otlp_logs.LogEncoder`` and sent by the same transports as the metrics
(``gpu_otel_agent.export.otlp.senders``), so the standard ``OTEL_EXPORTER_OTLP_*`` /
``OTEL_EXPORTER_OTLP_LOGS_*`` variables, TLS, headers, compression, the timeout and retries
behave as in every OpenTelemetry SDK. They block; the event pusher calls them on its own
thread.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Protocol

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.events.console_lines import event_line
from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.otlp.retry import Attempt
from gpu_otel_agent.export.otlp.senders import RequestSender, build_request_sender
from gpu_otel_agent.export.otlp.target import resolve_target
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.model.resource import ResourceView

ACCEPTED = Attempt(ok=True)


class EventSender(Protocol):
    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        """``ok`` when the collector accepted every event; ``bad_content`` when it refused
        them for good (the pusher then finds the event it will not take, ``quarantine``)."""

    def shutdown(self) -> None: ...


# A request of several events is kept below what a gRPC server takes by default (4 MiB,
# ``grpc_transport.DEFAULT_MAX_MESSAGE``), with room for the framing: a larger batch is split
# by the pusher (as it splits a refused one) before it is sent. One event above it is still
# sent (the collector may take more); refused, it is quarantined.
MAX_BATCH_BYTES = 4 * 1024 * 1024 - 64 * 1024
SPLIT = "SPLIT"  # the code of a batch not sent because it is too large as one request


class OtlpEventSender:
    def __init__(self, transport: RequestSender, encoder: LogEncoder,
                 max_batch_bytes: int = MAX_BATCH_BYTES) -> None:
        self._transport = transport
        self._encoder = encoder
        self._max_batch_bytes = max_batch_bytes

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        request = self._encoder.encode_bytes(events)
        if len(events) > 1 and len(request) > self._max_batch_bytes:
            return Attempt(ok=False, code=SPLIT, bad_content=True)
        return self._transport.send(request)

    def shutdown(self) -> None:
        self._transport.shutdown()


class NoEventSender:
    """``exporter: none``: events stay local (the local endpoint keeps the recent ones)."""

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        return ACCEPTED

    def shutdown(self) -> None:
        return None


class ConsoleEventSender:
    """``exporter: console``: one line per event on stdout, for a person
    (``console_lines.event_line``), or with ``json`` one JSON object per record, named as in
    OTLP."""

    def __init__(self, json: bool = False) -> None:
        self._json = json

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        if not self._json:
            sys.stdout.write("".join(event_line(event) + "\n" for event in events))
            sys.stdout.flush()
            return ACCEPTED
        for event in events:
            for attributes in event.records():
                record = {
                    "event_name": event.name,
                    "time_unix_nano": event.time_ns,
                    "severity_text": event.severity.text,
                    "body": event.body,
                    "attributes": {k: list(v) if isinstance(v, tuple) else v
                                   for k, v in attributes},
                }
                sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()
        return ACCEPTED

    def shutdown(self) -> None:
        return None


def build_event_sender(
    config: AgentConfig, resource: ResourceView, environ: Mapping[str, str] | None = None
) -> EventSender:
    env = os.environ if environ is None else environ
    if config.exporter == "console":
        return ConsoleEventSender(json=config.console_format == "otlp-json")
    if config.exporter == "none":
        return NoEventSender()
    return OtlpEventSender(build_request_sender(resolve_target(config, env, "LOGS")),
                           LogEncoder(resource))
