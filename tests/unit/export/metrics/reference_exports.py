"""One long-lived encoder's export checked against two references: a fresh encoder on the
general path (no kept state, no shapes) and the OpenTelemetry SDK's encoder. The template
tests of device metrics and of the agent's own telemetry both drive random snapshots
through it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest.mock import patch

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics import series as series_module
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.model.snapshot import NodeSnapshot
from tests.unit.export.metrics.series_end_points import Series, without_ends


@contextmanager
def general_path() -> Iterator[None]:
    """``series`` as in a fresh process, and without shapes: every run a list of points."""
    with patch.dict(series_module._latest, clear=True), \
            patch.dict(series_module._attributes, clear=True), \
            patch.dict(series_module._own_latest, clear=True), \
            patch.dict(series_module._devices, clear=True), \
            patch.object(series_module, "_layout", [None]), \
            patch.object(series_module, "_shape_of", lambda readings, runs: None):
        yield


def series_of(request: ExportMetricsServiceRequest) -> set[Series]:
    return {(m.name, frozenset((a.key, str(a.value)) for a in p.attributes))
            for r in request.resource_metrics for s in r.scope_metrics for m in s.metrics
            for p in (m.gauge.data_points if m.HasField("gauge") else m.sum.data_points)}


def check_export(kept: ProtoEncoder, snapshot: NodeSnapshot, previous: set[Series],
                 resource: Resource) -> tuple[int, set[Series]]:
    """Encode ``snapshot`` with ``kept`` and assert it sends what both references send (byte
    for byte when no series ends), and that every series the last export sent and this one
    lacks ends here, once. Returns how many ended and this export's series."""
    raw = kept.encode_bytes(snapshot)
    with general_path():
        fresh_raw = ProtoEncoder(resource).encode_bytes(snapshot)
    sdk = encode_metrics(encode(snapshot, resource))
    ours, ends = without_ends(ExportMetricsServiceRequest.FromString(raw))
    fresh = ExportMetricsServiceRequest.FromString(fresh_raw)
    if not ends:
        assert raw == fresh_raw
    assert ours == fresh
    assert ours == sdk
    now = series_of(fresh)
    assert len(ends) == len(set(ends)) and set(ends) == previous - now
    return len(ends), now
