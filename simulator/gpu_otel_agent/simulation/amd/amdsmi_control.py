"""ctypes binding of the simamd_* control functions of the simulated ``libamd_smi.so``.

Only signatures live here; the shared-memory layout stays in C.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from gpu_otel_agent.simulation.core.control_binding import ControlLib

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


class AmdNodeLib(ControlLib):
    """The control side of one AMD state file, for the node daemon."""

    def __init__(self, library: Path) -> None:
        c_int, c_uint, c_double = ctypes.c_int, ctypes.c_uint, ctypes.c_double
        c_char_p = ctypes.c_char_p
        c_ull, c_ll, c_long = ctypes.c_ulonglong, ctypes.c_longlong, ctypes.c_long
        super().__init__(
            library,
            "simamd_",
            {
                "set_system": (c_int, [c_char_p, c_char_p]),
                "set_string": (c_int, [c_int, c_char_p, c_char_p]),
                "set_bdf": (c_int, [c_int, c_ull, c_uint, c_uint, c_uint]),
                "bump": (c_int, [c_int, c_int, c_double]),
                "push_event": (c_ll, [c_int, c_uint, c_char_p]),
                "proc_add": (c_int, [c_int, c_uint, c_double, c_double, c_double, c_uint,
                                     c_uint]),
                "set_reset": (c_int, [c_int, c_uint]),
                "set_partition": (c_int, [c_int, c_int, c_uint, c_char_p, c_char_p, c_uint,
                                          c_uint]),
                "set_lib_version": (c_int, [c_uint, c_uint, c_uint]),
                "layout_count": (c_int, []),
                "layout_name": (c_char_p, [c_int]),
                "layout_size": (c_long, [c_int]),
                "layout_offset": (c_long, [c_int]),
            },
        )

    def set_system(self, driver: str, date: str) -> None:
        self._check(self._lib.simamd_set_system(driver.encode(), date.encode()), "system")

    def set_lib_version(self, major: int, minor: int, release: int = 0) -> None:
        """What ``amdsmi_get_lib_version`` answers (the modelled library)."""
        self._check(self._lib.simamd_set_lib_version(major, minor, release), "lib version")

    def set_string(self, dev: int, key: str, value: str) -> None:
        self._check(self._lib.simamd_set_string(dev, key.encode(), value.encode()), key)

    def set_bdf(self, dev: int, bus_id: str) -> None:
        """``bus_id`` as ``DDDD[DDDD]:BB:DD.F``."""
        domain, bus, rest = bus_id.split(":")
        device, function = rest.split(".")
        rc = self._lib.simamd_set_bdf(
            dev, int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
        )
        self._check(rc, f"bdf {bus_id}")

    def set_partition(  # noqa: PLR0917 - mirrors the C signature
        self, dev: int, socket: int, partition_id: int, compute: str, memory: str,
        uuid_per_partition: bool = False, vram_split: bool = False, modes_everywhere: bool = False,
        partition_memory: bool = False,
    ) -> None:
        """Serve ``dev`` as compute partition ``partition_id`` of the socket whose primary
        processor is ``socket`` (``socket == dev`` for the primary itself); empty modes: the
        part has no partition files. A device with no UUID set gets the one amdsmi generates
        (shared by the socket's partitions unless ``uuid_per_partition``). ``vram_split``: its
        VRAM total is its share (else the whole device's); ``modes_everywhere``: it answers the
        partition-mode queries even when it is not XCP 0; ``partition_memory``: its
        ``amdsmi_get_gpu_memory_usage`` is its own VRAM use (else the device's)."""
        flags = (1 if vram_split else 0) | (2 if modes_everywhere else 0) | (
            4 if partition_memory else 0)
        rc = self._lib.simamd_set_partition(dev, socket, partition_id, compute.encode(),
                                            memory.encode(), int(uuid_per_partition), flags)
        self._check(rc, f"partition {partition_id}")

    def bump(self, dev: int, name: str, by: float) -> None:
        self._check(self._lib.simamd_bump(dev, self.readings[name], by), name)

    def push_event(self, dev: int, kind: str, message: str) -> int:
        rc = int(self._lib.simamd_push_event(dev, EVENT_TYPES[kind], message.encode()[:255]))
        return self._check(rc, "event")

    def proc_add(  # noqa: PLR0917 - mirrors the C signature
        self,
        dev: int,
        pid: int,
        vram_mib: float,
        gfx_util: float,
        enc_util: float = 0.0,
        cu_occupancy: int = 0,
        drm: bool = False,
    ) -> None:
        """``drm``: the process submits through DRM (graphics), so fdinfo counts its engine
        time; a HIP process (the default) submits through /dev/kfd and shows 0 ns there."""
        self._proc_added(self._lib.simamd_proc_add(
            dev, pid, vram_mib, gfx_util, enc_util, cu_occupancy, int(drm)))

    def set_reset(self, dev: int, status: int) -> None:
        """Answer ``status`` from sysfs-backed calls (0: the reset is over)."""
        self._check(self._lib.simamd_set_reset(dev, status), "reset")

    def layouts(self) -> dict[str, tuple[int, int]]:
        """``type.field`` -> (sizeof type, offsetof field), as compiled."""
        lib = self._lib
        return {
            lib.simamd_layout_name(i).decode(): (
                int(lib.simamd_layout_size(i)),
                int(lib.simamd_layout_offset(i)),
            )
            for i in range(lib.simamd_layout_count())
        }

    def call_counts(self) -> tuple[dict[str, int], dict[int, dict[str, int]]]:
        """(total per function, per local device per function), non-zero entries only."""
        totals, per_function = self.call_table()
        per_dev: dict[int, dict[str, int]] = {}
        for name, devs in per_function.items():
            for d, c in devs.items():
                per_dev.setdefault(d, {})[name] = c
        return totals, per_dev
