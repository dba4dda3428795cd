"""A group's field values read into one kept array, and decoded in one ``struct`` call.

``pynvml.nvmlDeviceGetFieldValues`` builds a new array per call and sets each record's field
and scope ids through ``_PrintableStructure.__setattr__`` (Python, twice per field): about ten
times the library call itself for a group of six fields (issue 41). A :class:`FieldBatch` is
made once per probed plan: its array is reset before each call from a copy of its bytes taken
when the ids were set (ids in place, every output zero: what pynvml's fresh array holds), so
the library sees the same input, and it is called as pynvml calls it (``library.py``: the same
errors).

Decoding: while every field answers SUCCESS with the value type it answered last, the whole
array is unpacked by one ``struct`` built for those types; the codes and types it unpacks are
compared with what it was built for before any value is used, and on any difference (an error,
a type that changed) the answer is read record by record as ``field_values.field_results``
reads it, which also learns the new types. ``tests/unit/nvidia/test_field_batch.py`` pins it
to pynvml's own wrapper and attribute path over changing answers.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import pynvml

from gpu_otel_agent.plugins.nvidia.field_values import LAYOUT, Layout, field_results
from gpu_otel_agent.plugins.nvidia.library import check, function

FieldId = int | tuple[int, int]  # a field, or (field, scope) as pynvml takes them
Answer = tuple[int, int, "float | int | None"]  # (return code, timestamp in µs, number)
CALL = "nvmlDeviceGetFieldValues"


class FieldBatch:
    """The fields ``ids`` of one device group, read with one call into a kept array (one
    device thread calls it: the array is not shared). ``fields`` is what the caller made it
    for (the device's plan, compared by identity)."""

    def __init__(self, fields: object, ids: Sequence[FieldId],
                 layout: Layout | None = LAYOUT) -> None:
        self.fields = fields
        self._array = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for record, field in zip(self._array, ids, strict=True):
            if isinstance(field, tuple):
                record.fieldId, record.scopeId = field
            else:
                record.fieldId = field
        self._fresh = bytes(self._array)
        # Reset by a slice assignment into the array's own bytes: ``ctypes.memmove`` is a
        # foreign call (argument conversion, the GIL dropped and taken again) per read.
        self._bytes = memoryview(self._array).cast("B")
        self._count = ctypes.c_int32(len(ids))
        self._ref = ctypes.byref(self._array)
        self._function: Any = None  # the C function, once found
        self._layout = layout
        self._successes = (pynvml.NVML_SUCCESS,) * len(ids)
        self._kinds: tuple[int, ...] = ()  # value types the whole-array struct reads
        self._whole: struct.Struct | None = None

    @property
    def array(self) -> ctypes.Array[Any]:
        """The kept array the library fills (read by :meth:`answers`)."""
        array: ctypes.Array[Any] = self._array
        return array

    def call(self, handle: object) -> None:
        """Ask the library for every field (raises pynvml's error of a failed call)."""
        self._bytes[:] = self._fresh
        fn = self._function
        if fn is None:  # found once (pynvml never unloads the library); raises as pynvml's
            fn = self._function = function(CALL)
        code = fn(handle, self._count, self._ref)
        if code != pynvml.NVML_SUCCESS:
            check(code)

    def answers(self) -> Iterable[Answer]:
        """(code, timestamp µs, number or None) per field, as ``field_results`` reads them."""
        whole, layout = self._whole, self._layout
        if whole is not None and layout is not None:
            flat = whole.unpack_from(self._array)
            at_time, at_kind, at_code = layout.order
            # Checked before any value is used: a value is read by the member its type names.
            if flat[at_code::4] == self._successes and flat[at_kind::4] == self._kinds:
                return zip(self._successes, flat[at_time::4], flat[3::4], strict=True)
        results = field_results(self._array, layout)
        self._learn(results)
        return results

    def _learn(self, results: Sequence[Answer]) -> None:
        """After an answer read record by record: when every field succeeded, a struct for
        the whole array with the value types it answered (the next read's fast path)."""
        layout = self._layout
        self._whole = None
        if layout is None or any(code != pynvml.NVML_SUCCESS for code, _, _ in results):
            return
        kinds = tuple(int(record.valueType) for record in self._array)
        if any(kind not in layout.standard for kind in kinds):
            return
        head = layout.head.format.lstrip("=@<>!")
        at = layout.head.size
        parts = []
        for kind in kinds:
            code = layout.standard[kind]
            end = layout.value_offset + struct.calcsize("=" + code)
            parts.append(head + "x" * (layout.value_offset - at) + code
                         + "x" * (layout.size - end))
        self._kinds = kinds
        self._whole = struct.Struct("=" + "".join(parts))
