"""OTLP common values built with opentelemetry-proto's generated classes: the reference the
hand-written encoders (``export/otlp/wire_values``, ``export/events/otlp_logs``) are compared
with. The agent built its messages this way before issue 41."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.sdk.resources import Resource

Value = bool | str | int | float | Sequence["Value"]


def any_value(value: Value) -> AnyValue:
    if isinstance(value, bool):  # before int: a bool is an int
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))


def proto_resource(resource: Resource) -> ProtoResource:
    return ProtoResource(attributes=[KeyValue(key=k, value=any_value(v))  # type: ignore[arg-type]
                                     for k, v in resource.attributes.items()])
