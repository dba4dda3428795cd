"""OTLP's common values (``AnyValue``, ``KeyValue``, a ``Resource``, an ``InstrumentationScope``)
written in protobuf wire format by hand.

The metric encoder needs these few messages' bytes only; building them through
opentelemetry-proto's generated classes loads protobuf's upb runtime and its descriptor pool,
3.7 MiB of the agent's resident memory for a handful of byte strings made once per attribute
set. The bytes equal the generated classes' ``SerializeToString`` (field-number order, proto3
defaults left out, a oneof written even when it holds its default):
``tests/unit/export/otlp/test_wire_values.py`` compares the two over many values and checks
every field number below against the installed descriptors.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

Value = bool | str | int | float | Sequence["Value"]

# Field tags (field number << 3 | wire type) of opentelemetry/proto/common/v1/common.proto and
# resource/v1/resource.proto; checked against the descriptors by the test named above.
ANY_STRING = 0x0A  # AnyValue.string_value = 1, length-delimited
ANY_BOOL = 0x10  # AnyValue.bool_value = 2, varint
ANY_INT = 0x18  # AnyValue.int_value = 3, varint (int64, two's complement)
ANY_DOUBLE = 0x21  # AnyValue.double_value = 4, fixed64
ANY_ARRAY = 0x2A  # AnyValue.array_value = 5, length-delimited
ARRAY_VALUES = 0x0A  # ArrayValue.values = 1
KEY_VALUE_KEY = 0x0A  # KeyValue.key = 1
KEY_VALUE_VALUE = 0x12  # KeyValue.value = 2
RESOURCE_ATTRIBUTES = 0x0A  # Resource.attributes = 1
SCOPE_NAME = 0x0A  # InstrumentationScope.name = 1
SCOPE_VERSION = 0x12  # InstrumentationScope.version = 2

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_DOUBLE = struct.Struct("<Bd")


# One-byte varints, made once: most lengths written here are below 128.
_SMALL = tuple(bytes((n,)) for n in range(0x80))


def varint(value: int) -> bytes:
    """A non-negative integer as a protobuf base-128 varint."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + varint(len(payload)) + payload


def any_value(value: Value) -> bytes:
    """An ``AnyValue``'s bytes; raises ValueError for an int outside int64, as protobuf does."""
    if isinstance(value, bool):  # before int: a bool is an int
        return bytes((ANY_BOOL, 1 if value else 0))
    if isinstance(value, str):
        return _delimited(ANY_STRING, value.encode())
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"Value out of range: {value}")
        return bytes((ANY_INT,)) + varint(value & 0xFFFF_FFFF_FFFF_FFFF)
    if isinstance(value, float):
        return _DOUBLE.pack(ANY_DOUBLE, value)
    items = b"".join(_delimited(ARRAY_VALUES, any_value(v)) for v in value)
    return _delimited(ANY_ARRAY, items)


def key_value(key: str, value: Value) -> bytes:
    """A ``KeyValue``'s bytes (not length-prefixed: the caller's field tag goes around it)."""
    encoded_key = key.encode()
    if type(value) is str:  # the common case, written in one go (the encoder's cache misses)
        text = value.encode()
        encoded = b"\x0a" + varint(len(text)) + text  # AnyValue.string_value
    else:
        encoded = any_value(value)
    return ((b"\x0a" + varint(len(encoded_key)) + encoded_key if encoded_key else b"")
            + b"\x12" + varint(len(encoded)) + encoded)


def resource(attributes: Iterable[tuple[str, Value]]) -> bytes:
    """A ``Resource``'s bytes: its attributes, nothing dropped."""
    return b"".join(_delimited(RESOURCE_ATTRIBUTES, key_value(k, v)) for k, v in attributes)


def scope(name: str, version: str) -> bytes:
    """An ``InstrumentationScope``'s bytes (name and version; empty ones left out)."""
    return ((_delimited(SCOPE_NAME, name.encode()) if name else b"")
            + (_delimited(SCOPE_VERSION, version.encode()) if version else b""))
