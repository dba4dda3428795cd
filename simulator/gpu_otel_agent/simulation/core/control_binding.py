"""ctypes binding of the control functions every simulated library exports.

The C side is simcore_state.h plus ``create``/``tick`` and the function table, which each
library writes itself; their exported names carry the library's prefix (``simnode_``,
``simamd_``). Vendor bindings subclass :class:`ControlLib` for their own functions. Only
signatures live here; the shared-memory layout stays in C.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

Signature = tuple[object, list[object]]

_c_int, _c_uint, _c_double = ctypes.c_int, ctypes.c_uint, ctypes.c_double
_c_char_p, _c_ull = ctypes.c_char_p, ctypes.c_ulonglong

_COMMON: dict[str, Signature] = {
    "create": (_c_int, [_c_char_p, _c_int]),
    "set_reading": (_c_int, [_c_int, _c_int, _c_double]),
    "get_reading": (_c_double, [_c_int, _c_int]),
    "set_unsupported": (_c_int, [_c_int, _c_int, _c_int]),
    "set_function_unsupported": (_c_int, [_c_int, _c_int, _c_int]),
    "set_lost": (_c_int, [_c_int, _c_int]),
    "set_hang_ms": (_c_int, [_c_int, _c_int]),
    "get_lost": (_c_int, [_c_int]),
    "proc_rm": (_c_int, [_c_int, _c_uint]),
    "proc_count": (_c_int, []),
    "tick": (_c_int, [_c_double]),
    "call_count": (_c_ull, [_c_int, _c_int]),
    "reading_count": (_c_int, []),
    "reading_name": (_c_char_p, [_c_int]),
    "function_count": (_c_int, []),
    "function_name": (_c_char_p, [_c_int]),
    "device_count": (_c_int, []),
    "event_seq": (_c_ull, []),
    "max_processes": (_c_int, []),
}


class ControlLib:
    """The control side of one state file, for the node daemon."""

    def __init__(self, library: Path, prefix: str, extra: Mapping[str, Signature]) -> None:
        lib = ctypes.CDLL(str(library))
        self._lib = lib
        self._c: dict[str, Any] = {}
        for name, (res, args) in {**_COMMON, **extra}.items():
            fn = getattr(lib, prefix + name)
            fn.restype = res
            fn.argtypes = args
            self._c[name] = fn
        c = self._c
        self.readings: dict[str, int] = {
            c["reading_name"](i).decode(): i for i in range(c["reading_count"]())
        }
        self.functions: dict[str, int] = {
            c["function_name"](i).decode(): i for i in range(c["function_count"]())
        }

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            raise ValueError(f"{what} failed ({rc})")
        return rc

    def create(self, path: Path, n_devices: int) -> None:
        self._check(self._c["create"](str(path).encode(), n_devices), f"create {path}")

    def set_reading(self, dev: int, name: str, value: float | None) -> None:
        rid = self.readings[name]
        if value is None:
            self._check(self._c["set_unsupported"](dev, rid, 1), name)
        else:
            self._check(self._c["set_reading"](dev, rid, float(value)), name)

    def get_reading(self, dev: int, name: str) -> float | None:
        v = float(self._c["get_reading"](dev, self.readings[name]))
        return None if math.isnan(v) else v

    def set_function_unsupported(self, dev: int, function: str, unsupported: bool = True) -> None:
        fid = self.functions[function]
        self._check(self._c["set_function_unsupported"](dev, fid, int(unsupported)), function)

    def set_lost(self, dev: int, lost: bool) -> None:
        self._check(self._c["set_lost"](dev, int(lost)), "lost")

    def set_hang_ms(self, dev: int, ms: int) -> None:
        self._check(self._c["set_hang_ms"](dev, ms), "hang")

    def lost(self, dev: int) -> bool:
        return bool(self._c["get_lost"](dev) == 1)

    def _proc_added(self, rc: int) -> None:
        if rc == -3:
            raise ValueError("process table full")
        self._check(rc, "proc_add")

    def proc_rm(self, dev: int, pid: int) -> int:
        return self._check(self._c["proc_rm"](dev, pid), "proc_rm")

    def proc_count(self) -> int:
        return int(self._c["proc_count"]())

    def tick(self, dt: float) -> None:
        self._c["tick"](dt)

    def device_count(self) -> int:
        return int(self._c["device_count"]())

    def event_seq(self) -> int:
        return int(self._c["event_seq"]())

    def call_count(self, function_id: int, dev: int = -1) -> int:
        """Calls of one function on device ``dev``, or on all devices and none (``dev < 0``)."""
        return int(self._c["call_count"](function_id, dev))

    def call_table(self) -> tuple[dict[str, int], dict[str, dict[int, int]]]:
        """(total per function, per function per device), non-zero entries only."""
        totals: dict[str, int] = {}
        per_function: dict[str, dict[int, int]] = {}
        n = self.device_count()
        for name, fid in self.functions.items():
            total = self.call_count(fid)
            if not total:
                continue
            totals[name] = total
            devs = {d: c for d in range(n) if (c := self.call_count(fid, d))}
            if devs:
                per_function[name] = devs
        return totals, per_function
