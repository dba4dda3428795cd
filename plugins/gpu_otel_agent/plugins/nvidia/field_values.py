"""An ``nvmlDeviceGetFieldValues`` answer read from its array's bytes, not field by field.

pynvml returns the ``c_nvmlFieldValue_t`` array the library filled. Its structures subclass
``_PrintableStructure``, whose ``__getattribute__`` runs in Python on every attribute read
(``value.nvmlReturn``, ``value.timestamp``, ``value.valueType``, ``value.value.dVal``): four to
five per field, 1,959 per cycle at 16 GPUs x 256 processes (issue 41's profile), most of the
fields' marshalling cost. Here the array is copied once (``bytes``, the buffer protocol every
ctypes array has) and each record unpacked with one ``struct`` call, at offsets and types taken
from pynvml's PUBLIC types themselves (``c_nvmlFieldValue_t.<field>.offset``, the union
members' ctypes type codes), so a pynvml whose layout moved is followed, not guessed.

What this relies on beyond pynvml's documentation -- that the function returns a ctypes array
of ``c_nvmlFieldValue_t`` -- is pinned by ``tests/unit/nvidia/test_field_values.py`` (and the
dependency's version range); where the layout is not what is expected (:func:`layout` is None)
the reader falls back to pynvml's attribute access.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pynvml

from gpu_otel_agent.plugins.nvidia.nvml import field_value
from gpu_otel_agent.plugins.nvidia.records import layout_format, standard_code

# nvml.h nvmlValueType_t -> the nvmlValue_t member that holds it.
_MEMBERS = {
    "NVML_VALUE_TYPE_DOUBLE": "dVal",
    "NVML_VALUE_TYPE_UNSIGNED_INT": "uiVal",
    "NVML_VALUE_TYPE_UNSIGNED_LONG": "ulVal",
    "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG": "ullVal",
    "NVML_VALUE_TYPE_SIGNED_LONG_LONG": "sllVal",
    "NVML_VALUE_TYPE_SIGNED_INT": "siVal",
    "NVML_VALUE_TYPE_UNSIGNED_SHORT": "usVal",
}
_HEAD_FIELDS = ("timestamp", "valueType", "nvmlReturn")  # what every record needs read


@dataclass(frozen=True)
class Layout:
    """Where a ``c_nvmlFieldValue_t``'s fields sit, as ``struct`` formats."""

    size: int  # one record
    head: struct.Struct  # (timestamp, valueType, nvmlReturn) in offset order, from the start
    order: tuple[int, int, int]  # positions of timestamp, valueType, nvmlReturn in ``head``
    value_offset: int  # the union
    values: dict[int, struct.Struct]  # valueType -> the member's format (native)
    # valueType -> the member's ``struct`` code at standard size (``=``: native order, no
    # alignment), for formats spanning several records (field_batch.py)
    standard: dict[int, str]


def _code(ctype: Any) -> str | None:
    """The ``struct`` code of a ctypes simple type (its public ``_type_`` letter, native)."""
    code = getattr(ctype, "_type_", None)
    return code if isinstance(code, str) and len(code) == 1 and code in "bBhHiIlLqQfd" else None


def _build() -> Layout | None:
    record = pynvml.c_nvmlFieldValue_t
    union = getattr(pynvml, "c_nvmlValue_t", None)
    fields = dict(getattr(record, "_fields_", ()))
    if union is None or "value" not in fields or any(f not in fields for f in _HEAD_FIELDS):
        return None
    names = sorted(_HEAD_FIELDS, key=lambda name: getattr(record, name).offset)
    fmt = layout_format(record, tuple(names), whole=False)
    if fmt is None:
        return None
    members = dict(getattr(union, "_fields_", ()))
    values: dict[int, struct.Struct] = {}
    standard: dict[int, str] = {}
    for constant, member in _MEMBERS.items():
        kind = getattr(pynvml, constant, None)
        code = _code(members.get(member))
        sized = standard_code(members.get(member))
        if kind is None or code is None or sized is None:
            continue
        values[int(kind)] = struct.Struct("@" + code)  # native size, as ctypes lays it out
        standard[int(kind)] = sized
    value_offset = record.value.offset
    if value_offset + max((s.size for s in values.values()), default=0) > ctypes.sizeof(record):
        return None
    return Layout(ctypes.sizeof(record), struct.Struct(fmt),
                  (names.index("timestamp"), names.index("valueType"),
                   names.index("nvmlReturn")), value_offset, values, standard)


LAYOUT = _build()


class FieldResult(NamedTuple):
    """One field's answer (a tuple: one per field per read): its return code, the driver's
    timestamp (µs since 1970, 0 when not given), and its number (None unless SUCCESS)."""

    code: int
    timestamp_us: int
    value: float | int | None


def field_results(values: Sequence[Any], layout: Layout | None = LAYOUT) -> list[FieldResult]:
    """The answers in ``values`` (what ``pynvml.nvmlDeviceGetFieldValues`` returned), in order.

    A success whose valueType is unknown raises ``ValueError``, as ``nvml.field_value`` does."""
    success = pynvml.NVML_SUCCESS
    if layout is None or not isinstance(values, ctypes.Array):
        return [FieldResult(int(v.nvmlReturn), int(v.timestamp),
                            field_value(v) if v.nvmlReturn == success else None)
                for v in values]
    raw = bytes(values)
    size, unpack_head = layout.size, layout.head.unpack_from
    at_time, at_kind, at_code = layout.order
    value_offset, by_kind = layout.value_offset, layout.values
    out = []
    for offset in range(0, len(raw), size):
        head = unpack_head(raw, offset)
        code = head[at_code]
        number: float | int | None = None
        if code == success:
            member = by_kind.get(head[at_kind])
            if member is None:
                raise ValueError(f"unknown NVML value type {head[at_kind]}")
            number = member.unpack_from(raw, offset + value_offset)[0]
        out.append(FieldResult(code, head[at_time], number))
    return out
