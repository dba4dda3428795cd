"""Arrays of pynvml structures read from their bytes: one ``struct`` call per record.

Process lists and per-process utilization samples come back as ctypes arrays of pynvml's
``_PrintableStructure`` subclasses, whose ``__getattribute__`` runs in Python on every field
read; indexing the array also builds a structure object per record. At 256 processes per GPU
that was most of a process's sampling cost (issue 41). A :class:`Records` reads the fields it
is given at the offsets and ctypes types the pynvml type itself declares, so a pynvml whose
layout moved is followed; where a field is missing or not a plain number it reads through the
attributes as before. ``tests/unit/nvidia/test_records.py`` pins both ways to agree.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

_SIZED = {1: "b", 2: "h", 4: "i", 8: "q"}


def standard_code(ctype: Any) -> str | None:
    """The ``struct`` code (standard sizes) of a ctypes integer or floating type."""
    code = getattr(ctype, "_type_", None)
    if not isinstance(code, str) or len(code) != 1 or code not in "bBhHiIlLqQfd":
        return None
    if code in "fd":
        return code
    sized = _SIZED[ctypes.sizeof(ctype)]
    return sized.upper() if code.isupper() else sized


def layout_format(structure: Any, names: tuple[str, ...], *, whole: bool) -> str | None:
    """A ``struct`` format reading ``names`` (in offset order) from one ``structure``; padded
    to the structure's size when ``whole``. None when the type does not lay them out so."""
    fields = dict(getattr(structure, "_fields_", ()))
    fmt, at = "=", 0
    for name in names:
        code = standard_code(fields.get(name))
        if code is None:
            return None
        offset = getattr(structure, name).offset
        if offset < at:
            return None
        fmt += "x" * (offset - at) + code
        at = offset + struct.calcsize("=" + code)
    size = ctypes.sizeof(structure)
    if at > size:
        return None
    return fmt + "x" * (size - at) if whole else fmt


class Records:
    """Reads ``names`` from each record of an array of ``structure``."""

    def __init__(self, structure: Any, names: tuple[str, ...]) -> None:
        self.structure = structure
        self.names = names
        fmt = layout_format(structure, names, whole=True)
        self.format = None if fmt is None else struct.Struct(fmt)

    def read(self, array: Any, count: int) -> list[tuple[Any, ...]]:
        """The first ``count`` records, each a tuple of the fields in ``names`` order."""
        if count <= 0:
            return []
        if self.format is None or not isinstance(array, ctypes.Array) \
                or array._type_ is not self.structure:
            names = self.names
            return [tuple(getattr(record, n) for n in names) for record in array[:count]]
        raw = memoryview(array).cast("B")[: count * self.format.size]
        return list(self.format.iter_unpack(raw))
