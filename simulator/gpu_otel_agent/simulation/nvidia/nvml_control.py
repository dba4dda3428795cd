"""ctypes binding of the simnode_* control functions exported by the simulated library.

Only function signatures live here; the shared-memory layout stays in C.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.core.control_binding import ControlLib

# nvml.h nvmlEventType* bits used by the control operations.
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID = 0x8
EVENT_RECOVERY_ACTION = 0x8000  # nvmlEventTypeGpuRecoveryAction
RECOVERY_ACTIONS = range(8)  # nvmlDeviceGpuRecoveryAction_t: NONE (0) .. SYSTEM_REBOOT (7)
EVENT_MIG_CONFIG_CHANGE = 0x100
MIG_NONE = 0xFFFFFFFF  # NVML's "no instance" (process and event records)
PROC_KINDS = {"compute": 1, "graphics": 2, "mps": 4}


@dataclass(frozen=True)
class MigDeviceSpec:
    """The arguments of simnode_mig_create: one MIG device (a compute instance)."""

    index: int | None  # MIG device index (None: the lowest free one)
    gi: int  # GPU instance id
    ci: int  # compute instance id within it
    profile: str  # the MIG device's profile name ("3g.40gb", "1c.3g.40gb")
    profile_id: int  # NVML_GPU_INSTANCE_PROFILE_* of its GPU instance
    gi_slices: int
    ci_slices: int
    memory_mib: float  # its GPU instance's frame buffer
    sm_count: float
    uuid: str


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
                "mig_create": (c_int, [c_int, c_int, c_uint, c_uint, c_char_p, c_uint, c_uint,
                                       c_uint, c_double, c_double, c_char_p]),
                "mig_destroy": (c_int, [c_int, c_int]),
                "mig_set_reading": (c_int, [c_int, c_int, c_int, c_double]),
                "proc_set_mig": (c_int, [c_int, c_uint, c_uint, c_uint]),
                "push_event_mig": (c_ll, [c_int, c_ull, c_ull, c_uint, c_uint]),
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

    def mig_create(self, dev: int, device: MigDeviceSpec) -> int:
        """The slot (MIG device index) of the new MIG device."""
        d = device
        return self._check(self._c["mig_create"](
            dev, -1 if d.index is None else d.index, d.gi, d.ci, d.profile.encode(),
            d.profile_id, d.gi_slices, d.ci_slices, d.memory_mib, d.sm_count, d.uuid.encode()),
            f"create MIG device {d.profile} (GPU instance {d.gi}, compute instance {d.ci})")

    def mig_destroy(self, dev: int, slot: int) -> None:
        self._check(self._c["mig_destroy"](dev, slot), "destroy MIG instance")

    def mig_set_reading(self, dev: int, slot: int, name: str, value: float) -> None:
        self._check(self._c["mig_set_reading"](dev, slot, self.readings[name], float(value)),
                    name)

    def proc_set_mig(self, dev: int, pid: int, place: tuple[int, int] | None) -> None:
        """Runs the process on (GPU instance, compute instance); None: the whole GPU."""
        gi, ci = place if place is not None else (MIG_NONE, MIG_NONE)
        self._check(self._c["proc_set_mig"](dev, pid, gi, ci), "process placement")

    def push_event_mig(self, dev: int, event_type: int, data: int, gi: int,
                       ci: int | None = None) -> int:
        """An event of GPU instance ``gi`` (and compute instance ``ci``, None: the GI's)."""
        return self._check(int(self._c["push_event_mig"](
            dev, event_type, data, gi, MIG_NONE if ci is None else ci)), "event")

    def call_counts(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """(total per function, per function per device), non-zero entries only."""
        totals, per_function = self.call_table()
        return totals, {
            name: {str(d): c for d, c in devs.items()} for name, devs in per_function.items()
        }
