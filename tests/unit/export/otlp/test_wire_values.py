"""The hand-written OTLP common values equal opentelemetry-proto's generated classes' bytes.

``export/otlp/wire_values`` writes ``AnyValue``, ``KeyValue``, ``Resource`` and
``InstrumentationScope`` without protobuf (issue 41: the running agent no longer loads it);
each encoding is compared here with ``SerializeToString`` of the generated message over values
of every kind, edge values included, and each field tag with the installed descriptors.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from gpu_otel_agent.export.otlp import wire_values
from gpu_otel_agent.export.otlp.senders import EXPORT_METHODS
from gpu_otel_agent.export.otlp.wire_values import Value
from tests.unit.export.otlp.generated_values import any_value as generated_any_value

EDGE_VALUES: list[Value] = [
    True, False, "", "gpu", "ünï\u2603\U0001f600", "x" * 200, 0, 1, -1, 127, 128, 300,
    (1 << 63) - 1, -(1 << 63), 1 << 40, -(1 << 40), 0.0, -0.0, 1.5, -2.25, 1e308, 5e-324,
    math.inf, -math.inf, [], ["a", "b"], [1, 2.5, True, "c"], [[1, [2]], []], ("t", 3),
]


def _random_value(rng: random.Random, depth: int = 0) -> Value:
    kind = rng.randrange(5 if depth < 2 else 4)
    if kind == 0:
        return rng.random() < 0.5
    if kind == 1:
        return "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(0, 40)))
    if kind == 2:
        return rng.randrange(-(1 << 63), 1 << 63) >> rng.randrange(64)
    if kind == 3:
        return rng.uniform(-1e12, 1e12)
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


VALUES = EDGE_VALUES + [_random_value(random.Random(seed)) for seed in range(300)]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_any_value_and_key_value_equal_the_generated_bytes(value: Value) -> None:
    generated = generated_any_value(value)
    assert wire_values.any_value(value) == generated.SerializeToString()
    for key in ("", "k", "gpu.process.pid", "ключ" * 40):
        assert wire_values.key_value(key, value) == KeyValue(
            key=key, value=generated).SerializeToString()
    assert AnyValue.FromString(wire_values.any_value(value)) == generated


def test_nan_is_written_as_protobuf_writes_it() -> None:
    assert wire_values.any_value(math.nan) == AnyValue(double_value=math.nan).SerializeToString()


@pytest.mark.parametrize("value", [1 << 63, -(1 << 63) - 1])
def test_an_int_outside_int64_is_refused_as_protobuf_refuses_it(value: int) -> None:
    with pytest.raises(ValueError):
        AnyValue(int_value=value)
    with pytest.raises(ValueError):
        wire_values.any_value(value)


def test_resource_and_scope_equal_the_generated_bytes() -> None:
    rng = random.Random(7)
    for size in range(0, 12):
        attributes = [(f"key.{i}.{rng.random()}", _random_value(rng)) for i in range(size)]
        generated = Resource(attributes=[KeyValue(key=k, value=generated_any_value(v))
                                         for k, v in attributes])
        assert wire_values.resource(attributes) == generated.SerializeToString()
    for name, version in (("gpu-otel-agent", "0.1.0"), ("", "1"), ("n", ""), ("", "")):
        assert wire_values.scope(name, version) == InstrumentationScope(
            name=name, version=version).SerializeToString()


CONTRACT: list[tuple[Any, str, int]] = [
    (AnyValue, "string_value", wire_values.ANY_STRING),
    (AnyValue, "bool_value", wire_values.ANY_BOOL),
    (AnyValue, "int_value", wire_values.ANY_INT),
    (AnyValue, "double_value", wire_values.ANY_DOUBLE),
    (AnyValue, "array_value", wire_values.ANY_ARRAY),
    (ArrayValue, "values", wire_values.ARRAY_VALUES),
    (KeyValue, "key", wire_values.KEY_VALUE_KEY),
    (KeyValue, "value", wire_values.KEY_VALUE_VALUE),
    (Resource, "attributes", wire_values.RESOURCE_ATTRIBUTES),
    (InstrumentationScope, "name", wire_values.SCOPE_NAME),
    (InstrumentationScope, "version", wire_values.SCOPE_VERSION),
]


@pytest.mark.parametrize(("message", "name", "tag"), CONTRACT,
                         ids=[f"{m.__name__}.{n}" for m, n, _ in CONTRACT])
def test_each_tag_is_the_installed_descriptors_field(message: Any, name: str, tag: int) -> None:
    field = message.DESCRIPTOR.fields_by_name[name]
    assert tag >> 3 == field.number


def test_export_method_paths_are_the_descriptors_services() -> None:
    for signal, module, service in (("METRICS", metrics_service_pb2, "MetricsService"),
                                    ("LOGS", logs_service_pb2, "LogsService")):
        described = module.DESCRIPTOR.services_by_name[service]
        method = described.methods_by_name["Export"]
        assert EXPORT_METHODS[signal] == f"/{described.full_name}/{method.name}"
