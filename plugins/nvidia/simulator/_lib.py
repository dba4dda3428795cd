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
EVENT_MIG_CONFIG_CHANGE = 0x100
MIG_NONE = 0xFFFFFFFF  # NVML's "no instance" (process and event records)
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
                # MIG (nvml_sim_mig.c)
                "mig_max": (c_int, []),
                "mig_enable": (c_int, [c_int, c_int]),
                "mig_create": (c_int, [c_int, c_uint, c_char_p, c_uint, c_uint, c_double,
                                       c_double, c_char_p]),
                "mig_destroy": (c_int, [c_int, c_int]),
                "mig_set_reading": (c_int, [c_int, c_int, c_int, c_double]),
                "proc_set_mig": (c_int, [c_int, c_uint, c_uint]),
                "push_event_mig": (c_ll, [c_int, c_ull, c_ull, c_uint]),
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

    # -- MIG ------------------------------------------------------------------------------

    def mig_enable(self, dev: int, on: bool) -> None:
        self._check(self._c["mig_enable"](dev, int(on)), "mig mode")

    def mig_create(  # noqa: PLR0917 - mirrors the C signature
        self, dev: int, gi_id: int, profile: str, profile_id: int, slices: int,
        memory_mib: float, sm_count: float, uuid: str,
    ) -> int:
        """The slot of the new instance."""
        return self._check(self._c["mig_create"](dev, gi_id, profile.encode(), profile_id,
                                                 slices, memory_mib, sm_count, uuid.encode()),
                           f"create MIG instance {profile}")

    def mig_destroy(self, dev: int, slot: int) -> None:
        self._check(self._c["mig_destroy"](dev, slot), "destroy MIG instance")

    def mig_set_reading(self, dev: int, slot: int, name: str, value: float) -> None:
        self._check(self._c["mig_set_reading"](dev, slot, self.readings[name], float(value)),
                    name)

    def proc_set_mig(self, dev: int, pid: int, gi: int | None) -> None:
        self._check(self._c["proc_set_mig"](dev, pid, MIG_NONE if gi is None else gi),
                    "process placement")

    def push_event_mig(self, dev: int, event_type: int, data: int, gi: int) -> int:
        return self._check(int(self._c["push_event_mig"](dev, event_type, data, gi)), "event")

    def call_counts(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """(total per function, per function per device), non-zero entries only."""
        totals, per_function = self.call_table()
        return totals, {
            name: {str(d): c for d, c in devs.items()} for name, devs in per_function.items()
        }
