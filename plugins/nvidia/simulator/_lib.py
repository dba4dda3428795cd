"""ctypes binding of the simnode_* control functions exported by the simulated library.

Only function signatures live here; the shared-memory layout stays in C.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from gpu_otel_agent.plugins.simulator_core.control import ControlLib

# nvml.h nvmlEventType* bits used by the control operations.
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID = 0x8
EVENT_RECOVERY_ACTION = 0x8000  # nvmlEventTypeGpuRecoveryAction
RECOVERY_ACTIONS = range(8)  # nvmlDeviceGpuRecoveryAction_t: NONE (0) .. SYSTEM_REBOOT (7)
PROC_KINDS = {"compute": 1, "graphics": 2, "mps": 4}


class NodeLib(ControlLib):
    """The control side of one NVML state file, for the node daemon."""

    def __init__(self, library: Path) -> None:
        c_int, c_uint, c_double, c_char_p = (
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_double,
            ctypes.c_char_p,
        )
        c_ull, c_ll = ctypes.c_ulonglong, ctypes.c_longlong
        super().__init__(
            library,
            "simnode_",
            {
                "open": (c_int, [c_char_p]),
                "set_system": (c_int, [c_char_p, c_char_p, c_int]),
                "set_string": (c_int, [c_int, c_char_p, c_char_p]),
                "get_hang_ms": (c_int, [c_int]),
                "push_event": (c_ll, [c_int, c_ull, c_ull]),
                "proc_add": (
                    c_int,
                    [c_int, c_uint, c_uint, c_double, c_double, c_double, c_double, c_double],
                ),
            },
        )

    def open(self, path: Path) -> int:
        return self._check(self._lib.simnode_open(str(path).encode()), f"open {path}")

    def set_system(self, driver: str, nvml: str, cuda: int) -> None:
        self._check(self._lib.simnode_set_system(driver.encode(), nvml.encode(), cuda), "system")

    def set_string(self, dev: int, key: str, value: str) -> None:
        self._check(self._lib.simnode_set_string(dev, key.encode(), value.encode()), key)

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
        self._proc_added(
            self._lib.simnode_proc_add(dev, pid, PROC_KINDS[kind], used_mib, sm, mem, enc, dec)
        )

    def call_counts(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """(total per function, per function per device), non-zero entries only."""
        totals, per_function = self.call_table()
        return totals, {
            name: {str(d): c for d, c in devs.items()} for name, devs in per_function.items()
        }
