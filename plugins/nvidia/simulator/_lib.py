"""ctypes binding of the simnode_* control functions exported by the simulated library.

Only function signatures live here; the shared-memory layout stays in C.
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

# nvml.h nvmlEventType* bits used by the control operations.
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID = 0x8
PROC_KINDS = {"compute": 1, "graphics": 2, "mps": 4}


class NodeLib:
    """The control side of one state file, for the node daemon."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._lib = lib
        c_int, c_uint, c_double, c_char_p = (
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_double,
            ctypes.c_char_p,
        )
        c_ull, c_ll = ctypes.c_ulonglong, ctypes.c_longlong
        sigs: dict[str, tuple[object, list[object]]] = {
            "simnode_create": (c_int, [c_char_p, c_int]),
            "simnode_open": (c_int, [c_char_p]),
            "simnode_set_system": (c_int, [c_char_p, c_char_p, c_int]),
            "simnode_set_string": (c_int, [c_int, c_char_p, c_char_p]),
            "simnode_set_reading": (c_int, [c_int, c_int, c_double]),
            "simnode_get_reading": (c_double, [c_int, c_int]),
            "simnode_set_unsupported": (c_int, [c_int, c_int, c_int]),
            "simnode_set_function_unsupported": (c_int, [c_int, c_int, c_int]),
            "simnode_set_lost": (c_int, [c_int, c_int]),
            "simnode_set_hang_ms": (c_int, [c_int, c_int]),
            "simnode_get_lost": (c_int, [c_int]),
            "simnode_get_hang_ms": (c_int, [c_int]),
            "simnode_push_event": (c_ll, [c_int, c_ull, c_ull]),
            "simnode_proc_add": (
                c_int,
                [c_int, c_uint, c_uint, c_double, c_double, c_double, c_double, c_double],
            ),
            "simnode_proc_rm": (c_int, [c_int, c_uint]),
            "simnode_proc_count": (c_int, []),
            "simnode_tick": (c_int, [c_double]),
            "simnode_call_count": (c_ull, [c_int, c_int]),
            "simnode_reading_count": (c_int, []),
            "simnode_reading_name": (c_char_p, [c_int]),
            "simnode_function_count": (c_int, []),
            "simnode_function_name": (c_char_p, [c_int]),
            "simnode_device_count": (c_int, []),
            "simnode_event_seq": (c_ull, []),
            "simnode_max_processes": (c_int, []),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        self.readings: dict[str, int] = {
            lib.simnode_reading_name(i).decode(): i for i in range(lib.simnode_reading_count())
        }
        self.functions: dict[str, int] = {
            lib.simnode_function_name(i).decode(): i for i in range(lib.simnode_function_count())
        }

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            raise ValueError(f"{what} failed ({rc})")
        return rc

    def create(self, path: Path, n_devices: int) -> None:
        self._check(self._lib.simnode_create(str(path).encode(), n_devices), f"create {path}")

    def open(self, path: Path) -> int:
        return self._check(self._lib.simnode_open(str(path).encode()), f"open {path}")

    def set_system(self, driver: str, nvml: str, cuda: int) -> None:
        self._check(self._lib.simnode_set_system(driver.encode(), nvml.encode(), cuda), "system")

    def set_string(self, dev: int, key: str, value: str) -> None:
        self._check(self._lib.simnode_set_string(dev, key.encode(), value.encode()), key)

    def set_reading(self, dev: int, name: str, value: float | None) -> None:
        rid = self.readings[name]
        if value is None:
            self._check(self._lib.simnode_set_unsupported(dev, rid, 1), name)
        else:
            self._check(self._lib.simnode_set_reading(dev, rid, float(value)), name)

    def get_reading(self, dev: int, name: str) -> float | None:
        v = float(self._lib.simnode_get_reading(dev, self.readings[name]))
        return None if math.isnan(v) else v

    def set_function_unsupported(self, dev: int, function: str, unsupported: bool = True) -> None:
        fid = self.functions[function]
        self._check(
            self._lib.simnode_set_function_unsupported(dev, fid, int(unsupported)), function
        )

    def set_lost(self, dev: int, lost: bool) -> None:
        self._check(self._lib.simnode_set_lost(dev, int(lost)), "lost")

    def set_hang_ms(self, dev: int, ms: int) -> None:
        self._check(self._lib.simnode_set_hang_ms(dev, ms), "hang")

    def lost(self, dev: int) -> bool:
        return bool(self._lib.simnode_get_lost(dev) == 1)

    def hang_ms(self, dev: int) -> int:
        return int(self._lib.simnode_get_hang_ms(dev))

    def push_event(self, dev: int, event_type: int, data: int = 0) -> int:
        return self._check(int(self._lib.simnode_push_event(dev, event_type, data)), "event")

    def proc_add(  # noqa: PLR0917 - mirrors the C signature
        self,
        dev: int,
        pid: int,
        kind: str,
        used_mib: float,
        sm: float,
        mem: float,
        enc: float = 0.0,
        dec: float = 0.0,
    ) -> None:
        rc = self._lib.simnode_proc_add(dev, pid, PROC_KINDS[kind], used_mib, sm, mem, enc, dec)
        if rc == -3:
            raise ValueError("process table full")
        self._check(rc, "proc_add")

    def proc_rm(self, dev: int, pid: int) -> int:
        return self._check(self._lib.simnode_proc_rm(dev, pid), "proc_rm")

    def proc_count(self) -> int:
        return int(self._lib.simnode_proc_count())

    def tick(self, dt: float) -> None:
        self._lib.simnode_tick(dt)

    def device_count(self) -> int:
        return int(self._lib.simnode_device_count())

    def event_seq(self) -> int:
        return int(self._lib.simnode_event_seq())

    def call_counts(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """(total per function, per function per device), non-zero entries only."""
        totals: dict[str, int] = {}
        per_dev: dict[str, dict[str, int]] = {}
        n = self.device_count()
        for name, fid in self.functions.items():
            total = int(self._lib.simnode_call_count(fid, -1))
            if not total:
                continue
            totals[name] = total
            devs = {str(d): c for d in range(n) if (c := int(self._lib.simnode_call_count(fid, d)))}
            if devs:
                per_dev[name] = devs
        return totals, per_dev
