"""Snapshot -> OTLP ``ExportMetricsServiceRequest``, directly and with attributes cached.

The SDK path (snapshot -> MetricsData -> ``encode_metrics``) rebuilds every attribute of every
point on every export; for 8 GPUs at 1 s that was the larger half of the agent's CPU (see the
benchmark report). A node's attribute sets barely change between exports, so their encoded
``KeyValue`` lists are built once and copied in. The result equals what the SDK would send
(``tests/unit/core/test_otlp_proto.py`` checks it).
"""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.sdk.resources import Resource

from agent.export.encode import SCOPE
from agent.export.proto_values import any_value, proto_resource
from agent.export.series import series
from agent.model.metrics import Instrument, spec_for
from agent.model.snapshot import Attributes, NodeSnapshot

# Bounds the cache when series come and go (processes, pods): cleared, not grown, past this.
MAX_CACHED_ATTRIBUTE_SETS = 20_000
CUMULATIVE = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


class ProtoEncoder:
    def __init__(self, resource: Resource) -> None:
        self._resource = proto_resource(resource)
        self._schema_url = resource.schema_url
        self._attributes: dict[Attributes, list[KeyValue]] = {}

    def _key_values(self, attributes: Attributes) -> list[KeyValue]:
        cached = self._attributes.get(attributes)
        if cached is None:
            if len(self._attributes) >= MAX_CACHED_ATTRIBUTE_SETS:
                self._attributes.clear()
            cached = [KeyValue(key=k, value=any_value(v)) for k, v in attributes]
            self._attributes[attributes] = cached
        return cached

    def encode(self, snapshot: NodeSnapshot) -> ExportMetricsServiceRequest:
        request = ExportMetricsServiceRequest()
        resource_metrics = request.resource_metrics.add(schema_url=self._schema_url)
        resource_metrics.resource.CopyFrom(self._resource)
        scope_metrics = resource_metrics.scope_metrics.add(schema_url=SCOPE.schema_url)
        scope_metrics.scope.name = SCOPE.name
        scope_metrics.scope.version = SCOPE.version or ""
        for name, points in series(snapshot).items():
            spec = spec_for(name)
            metric = scope_metrics.metrics.add(
                name=name, description=spec.description, unit=spec.unit)
            gauge = spec.instrument is Instrument.GAUGE
            if gauge:
                data_points = metric.gauge.data_points
            else:
                metric.sum.aggregation_temporality = CUMULATIVE
                metric.sum.is_monotonic = spec.instrument is Instrument.COUNTER
                data_points = metric.sum.data_points
            for point in points:
                data_point = data_points.add(time_unix_nano=point.time_ns)
                if not gauge:  # gauges carry no start time, as the SDK sends them
                    data_point.start_time_unix_nano = point.start_time_ns
                if isinstance(point.value, int):
                    data_point.as_int = point.value
                else:
                    data_point.as_double = point.value
                data_point.attributes.extend(self._key_values(point.attributes))
        return request
