"""Immutable records shared by the store, the decoders and the receivers.

They live in their own module so decoders and transports can build them
without importing the store (and its locking) and without import cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from google.protobuf.message import Message

Signal = Literal["metrics", "logs", "traces"]
Transport = Literal["grpc", "http"]


@dataclass(frozen=True)
class Point:
    """One gauge or sum data point, with its metric and resource context inlined.

    ``attributes`` and ``resource`` are plain dicts keyed by OTel attribute
    names (with dots) so pytest can diff them; do not mutate them.
    """

    metric: str
    unit: str
    kind: Literal["gauge", "sum"]
    monotonic: bool | None
    attributes: Mapping[str, object]
    resource: Mapping[str, object]
    value: float | int
    time_unix_nano: int
    start_time_unix_nano: int
    received_at: float


@dataclass(frozen=True)
class LogEvent:
    """One log record (health events are log records with an ``event_name``)."""

    event_name: str
    severity_number: int
    severity_text: str
    body: str
    attributes: Mapping[str, object]
    resource: Mapping[str, object]
    time_unix_nano: int
    observed_time_unix_nano: int
    received_at: float


@dataclass(frozen=True)
class Received:
    """One export request as it arrived, before flattening.

    Kept so tests can assert on transport facts the flattened view loses:
    request headers / gRPC metadata (lower-cased keys), wire compression
    (``None`` when uncompressed) and whether the receiver accepted it.
    ``received_at`` is ``time.time()`` at arrival.
    """

    signal: Signal
    transport: Transport
    request: Message
    received_at: float
    metadata: Mapping[str, str] = field(default_factory=dict)
    compression: str | None = None
    accepted: bool = True
