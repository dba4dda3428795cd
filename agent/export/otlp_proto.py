"""Snapshot -> OTLP ``ExportMetricsServiceRequest``, directly and with attributes cached.

The SDK path (snapshot -> MetricsData -> ``encode_metrics``) rebuilds every attribute of every
point on every export; for 8 GPUs at 1 s that was the larger half of the agent's CPU (see the
benchmark report). A node's attribute sets barely change between exports, so their encoded
``KeyValue`` lists are built once and copied in. The result equals what the SDK would send
(``tests/unit/core/test_otlp_proto.py`` checks it).

Data points are written in protobuf wire format (cached attribute bytes, then the times and
the value packed with ``struct``) and parsed into their metric in one C call: setting fields
and copying ``KeyValue`` messages point by point through the Python API cost about 4 µs a
point, most of an export's encoding (797 points for 8 GPUs with processes and
self-telemetry).
"""

from __future__ import annotations

import struct
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.encode import SCOPE
from gpu_otel_agent.export.proto_values import any_value, proto_resource
from gpu_otel_agent.export.series import series
from gpu_otel_agent.model.metrics import Instrument, spec_for
from gpu_otel_agent.model.snapshot import Attributes, NodeSnapshot

# Bounds the cache when series come and go (processes, pods): cleared, not grown, past this.
MAX_CACHED_ATTRIBUTE_SETS = 20_000
CUMULATIVE = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE

# NumberDataPoint fields (opentelemetry/proto/metrics/v1/metrics.proto), as wire-format tags:
# start_time_unix_nano = 2 and time_unix_nano = 3 (fixed64), as_double = 4 (double),
# as_int = 6 (sfixed64), attributes = 7 (KeyValue). Gauge/Sum data_points = 1 (message).
_DATA_POINTS_TAG = b"\x0a"
_ATTRIBUTE_TAG = b"\x3a"
_START_TIME_TAG, _TIME_TAG, _AS_DOUBLE_TAG, _AS_INT_TAG = 0x11, 0x19, 0x21, 0x31
# Gauges carry no start time, as the SDK sends them; sums do.
_GAUGE_DOUBLE = struct.Struct("<BQBd")  # 0x19 time, 0x21 as_double
_GAUGE_INT = struct.Struct("<BQBq")  # 0x19 time, 0x31 as_int
_SUM_DOUBLE = struct.Struct("<BQBQBd")  # 0x11 start, 0x19 time, 0x21 as_double
_SUM_INT = struct.Struct("<BQBQBq")  # 0x11 start, 0x19 time, 0x31 as_int


# The contract between this encoder and opentelemetry-proto: every tag written by hand above,
# with the field it must be. ``wire_contract_problem`` checks the tags against the installed
# descriptors at start-up (field number and wire type); the exporter falls back to the SDK's
# encoder when it does not hold, and tests/unit/core/test_otlp_contract.py fails.
WIRE_CONTRACT: tuple[tuple[Any, str, int], ...] = (
    (metrics_pb2.Gauge, "data_points", _DATA_POINTS_TAG[0]),
    (metrics_pb2.Sum, "data_points", _DATA_POINTS_TAG[0]),
    (metrics_pb2.NumberDataPoint, "start_time_unix_nano", _START_TIME_TAG),
    (metrics_pb2.NumberDataPoint, "time_unix_nano", _TIME_TAG),
    (metrics_pb2.NumberDataPoint, "as_double", _AS_DOUBLE_TAG),
    (metrics_pb2.NumberDataPoint, "as_int", _AS_INT_TAG),
    (metrics_pb2.NumberDataPoint, "attributes", _ATTRIBUTE_TAG[0]),
)
_FD = FieldDescriptor
_WIRE_TYPES = {_FD.TYPE_FIXED64: 1, _FD.TYPE_SFIXED64: 1, _FD.TYPE_DOUBLE: 1,
               _FD.TYPE_MESSAGE: 2}


def wire_contract_problem() -> str | None:
    """None when the installed opentelemetry-proto has the fields written by hand here."""
    for message, name, tag in WIRE_CONTRACT:
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            return f"{message.DESCRIPTOR.full_name} has no field {name}"
        expected = (field.number, _WIRE_TYPES.get(field.type))
        if (tag >> 3, tag & 7) != expected:
            return (f"{message.DESCRIPTOR.full_name}.{name} is field {field.number} "
                    f"(wire type {expected[1]}), the encoder writes tag {tag:#04x}")
    return None


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


class ProtoEncoder:
    def __init__(self, resource: Resource) -> None:
        self._resource = proto_resource(resource)
        self._schema_url = resource.schema_url
        # (attributes, point size without them) -> data point tag, length and attributes.
        self._heads: dict[tuple[Attributes, int], bytes] = {}

    def _head(self, attributes: Attributes, fixed_size: int) -> bytes:
        """A data point's bytes up to its times and value, built once per attribute set."""
        key = (attributes, fixed_size)
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) >= MAX_CACHED_ATTRIBUTE_SETS:
                self._heads.clear()
            encoded = b"".join(
                _length_delimited(_ATTRIBUTE_TAG,
                                  KeyValue(key=k, value=any_value(v)).SerializeToString())
                for k, v in attributes)
            head = _DATA_POINTS_TAG + _varint(len(encoded) + fixed_size) + encoded
            self._heads[key] = head
        return head

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
            data: metrics_pb2.Gauge | metrics_pb2.Sum
            if gauge:
                data = metric.gauge
            else:
                metric.sum.aggregation_temporality = CUMULATIVE
                metric.sum.is_monotonic = spec.instrument is Instrument.COUNTER
                data = metric.sum
            chunks = []
            head = self._head
            start_tag, time_tag, double_tag, int_tag = (
                _START_TIME_TAG, _TIME_TAG, _AS_DOUBLE_TAG, _AS_INT_TAG)
            for point in points:
                value = point.value
                if gauge:
                    if isinstance(value, int):
                        packed = _GAUGE_INT.pack(time_tag, point.time_ns, int_tag, value)
                    else:
                        packed = _GAUGE_DOUBLE.pack(time_tag, point.time_ns, double_tag,
                                                    value)
                elif isinstance(value, int):
                    packed = _SUM_INT.pack(start_tag, point.start_time_ns, time_tag,
                                           point.time_ns, int_tag, value)
                else:
                    packed = _SUM_DOUBLE.pack(start_tag, point.start_time_ns, time_tag,
                                              point.time_ns, double_tag, value)
                chunks.append(head(point.attributes, len(packed)))
                chunks.append(packed)
            # Repeated data_points: parsing appends each point, as add() would have.
            data.MergeFromString(b"".join(chunks))
        return request
