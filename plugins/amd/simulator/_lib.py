"""ctypes binding of the simamd_* control functions of the simulated ``libamd_smi.so``.

Only signatures live here; the shared-memory layout stays in C.
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

# amdsmi_evt_notification_type_t, by the names the control socket accepts.
EVENT_TYPES: dict[str, int] = {
    "vm_fault": 1,
    "thermal_throttle": 2,
    "gpu_pre_reset": 3,
    "gpu_post_reset": 4,
    "migrate_start": 5,
    "migrate_end": 6,
    "page_fault_start": 7,
    "page_fault_end": 8,
    "queue_eviction": 9,
    "queue_restore": 10,
    "unmap_from_gpu": 11,
    "process_start": 12,
    "process_end": 13,
}


class AmdNodeLib:
    """The control side of one AMD state file, for the node daemon."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._lib = lib
        c_int, c_uint, c_double = ctypes.c_int, ctypes.c_uint, ctypes.c_double
        c_char_p = ctypes.c_char_p
        c_ull, c_ll, c_long = ctypes.c_ulonglong, ctypes.c_longlong, ctypes.c_long
        sigs: dict[str, tuple[object, list[object]]] = {
            "simamd_create": (c_int, [c_char_p, c_int]),
            "simamd_set_system": (c_int, [c_char_p, c_char_p]),
            "simamd_set_string": (c_int, [c_int, c_char_p, c_char_p]),
            "simamd_set_bdf": (c_int, [c_int, c_ull, c_uint, c_uint, c_uint]),
            "simamd_set_reading": (c_int, [c_int, c_int, c_double]),
            "simamd_get_reading": (c_double, [c_int, c_int]),
            "simamd_bump": (c_int, [c_int, c_int, c_double]),
            "simamd_set_unsupported": (c_int, [c_int, c_int, c_int]),
            "simamd_set_function_unsupported": (c_int, [c_int, c_int, c_int]),
            "simamd_set_lost": (c_int, [c_int, c_int]),
            "simamd_set_hang_ms": (c_int, [c_int, c_int]),
            "simamd_get_lost": (c_int, [c_int]),
            "simamd_push_event": (c_ll, [c_int, c_uint, c_char_p]),
            "simamd_proc_add": (c_int, [c_int, c_uint, c_double, c_double, c_double, c_uint]),
            "simamd_proc_rm": (c_int, [c_int, c_uint]),
            "simamd_proc_count": (c_int, []),
            "simamd_tick": (c_int, [c_double]),
            "simamd_call_count": (c_ull, [c_int, c_int]),
            "simamd_reading_count": (c_int, []),
            "simamd_reading_name": (c_char_p, [c_int]),
            "simamd_function_count": (c_int, []),
            "simamd_function_name": (c_char_p, [c_int]),
            "simamd_device_count": (c_int, []),
            "simamd_event_seq": (c_ull, []),
            "simamd_max_processes": (c_int, []),
            "simamd_layout_count": (c_int, []),
            "simamd_layout_name": (c_char_p, [c_int]),
            "simamd_layout_size": (c_long, [c_int]),
            "simamd_layout_offset": (c_long, [c_int]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        self.readings: dict[str, int] = {
            lib.simamd_reading_name(i).decode(): i for i in range(lib.simamd_reading_count())
        }
        self.functions: dict[str, int] = {
            lib.simamd_function_name(i).decode(): i for i in range(lib.simamd_function_count())
        }

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            raise ValueError(f"{what} failed ({rc})")
        return rc

    def create(self, path: Path, n_devices: int) -> None:
        self._check(self._lib.simamd_create(str(path).encode(), n_devices), f"create {path}")

    def set_system(self, driver: str, date: str) -> None:
        self._check(self._lib.simamd_set_system(driver.encode(), date.encode()), "system")

    def set_string(self, dev: int, key: str, value: str) -> None:
        self._check(self._lib.simamd_set_string(dev, key.encode(), value.encode()), key)

    def set_bdf(self, dev: int, bus_id: str) -> None:
        """``bus_id`` as ``DDDD[DDDD]:BB:DD.F``."""
        domain, bus, rest = bus_id.split(":")
        device, function = rest.split(".")
        rc = self._lib.simamd_set_bdf(dev, int(domain, 16), int(bus, 16), int(device, 16),
                                      int(function, 16))
        self._check(rc, f"bdf {bus_id}")

    def set_reading(self, dev: int, name: str, value: float | None) -> None:
        rid = self.readings[name]
        if value is None:
            self._check(self._lib.simamd_set_unsupported(dev, rid, 1), name)
        else:
            self._check(self._lib.simamd_set_reading(dev, rid, float(value)), name)

    def get_reading(self, dev: int, name: str) -> float | None:
        v = float(self._lib.simamd_get_reading(dev, self.readings[name]))
        return None if math.isnan(v) else v

    def bump(self, dev: int, name: str, by: float) -> None:
        self._check(self._lib.simamd_bump(dev, self.readings[name], by), name)

    def set_function_unsupported(self, dev: int, function: str, unsupported: bool = True) -> None:
        fid = self.functions[function]
        self._check(self._lib.simamd_set_function_unsupported(dev, fid, int(unsupported)), function)

    def set_lost(self, dev: int, lost: bool) -> None:
        self._check(self._lib.simamd_set_lost(dev, int(lost)), "lost")

    def set_hang_ms(self, dev: int, ms: int) -> None:
        self._check(self._lib.simamd_set_hang_ms(dev, ms), "hang")

    def lost(self, dev: int) -> bool:
        return bool(self._lib.simamd_get_lost(dev) == 1)

    def push_event(self, dev: int, kind: str, message: str) -> int:
        rc = int(self._lib.simamd_push_event(dev, EVENT_TYPES[kind], message.encode()[:255]))
        return self._check(rc, "event")

    def proc_add(  # noqa: PLR0917 - mirrors the C signature
        self, dev: int, pid: int, vram_mib: float, gfx_util: float, enc_util: float = 0.0,
        cu_occupancy: int = 0,
    ) -> None:
        rc = self._lib.simamd_proc_add(dev, pid, vram_mib, gfx_util, enc_util, cu_occupancy)
        if rc == -3:
            raise ValueError("process table full")
        self._check(rc, "proc_add")

    def proc_rm(self, dev: int, pid: int) -> int:
        return self._check(self._lib.simamd_proc_rm(dev, pid), "proc_rm")

    def proc_count(self) -> int:
        return int(self._lib.simamd_proc_count())

    def tick(self, dt: float) -> None:
        self._lib.simamd_tick(dt)

    def device_count(self) -> int:
        return int(self._lib.simamd_device_count())

    def event_seq(self) -> int:
        return int(self._lib.simamd_event_seq())

    def layouts(self) -> dict[str, tuple[int, int]]:
        """``type.field`` -> (sizeof type, offsetof field), as compiled."""
        lib = self._lib
        return {
            lib.simamd_layout_name(i).decode(): (
                int(lib.simamd_layout_size(i)), int(lib.simamd_layout_offset(i))
            )
            for i in range(lib.simamd_layout_count())
        }

    def call_counts(self) -> tuple[dict[str, int], dict[int, dict[str, int]]]:
        """(total per function, per local device per function), non-zero entries only."""
        totals: dict[str, int] = {}
        per_dev: dict[int, dict[str, int]] = {}
        n = self.device_count()
        for name, fid in self.functions.items():
            total = int(self._lib.simamd_call_count(fid, -1))
            if not total:
                continue
            totals[name] = total
            for d in range(n):
                if c := int(self._lib.simamd_call_count(fid, d)):
                    per_dev.setdefault(d, {})[name] = c
        return totals, per_dev
