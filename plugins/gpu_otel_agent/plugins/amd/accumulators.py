"""Per-device state over the firmware's accumulating counters: throttle residency and energy.

Throttle reasons come from the metrics table's residency accumulators, compared between two of
our own reads. ``amdsmi_get_violation_status`` does the same thing inside the call: it reads
the table, sleeps 100 ms (``system_wait(kFASTEST_POLL_TIME_MS)``), reads it again and divides
the residency growth by the ``accumulation_counter`` growth (amdsmi ``src/amd_smi/amd_smi.cc``
at 0ceca28, ``amdsmi_get_violation_status``). Called per device per cycle that is 100 ms of a
worker thread gone every time; our two reads are a cycle apart instead, which is the same
measurement over a longer window, at no cost. On tables without the accumulators (before
v1.6) all of them are UINT64 max and amdsmi answers NOT_SUPPORTED; there the table's
``indep_throttle_status`` is read where the firmware fills it: the throttlers active at the
moment, in the ASIC-independent ``SMU_THROTTLER_*`` bits of the kernel's ``amdgpu_smu.h``
(aldebaran_ppt.c fills it on MI200's v1.3 table through ``smu_cmn_get_indep_throttler_status``;
the v1.4/v1.5 tables of MI300 have no such field, so nothing is read there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_otel_agent.model.snapshot import Reading
from gpu_otel_agent.plugins.amd.sentinels import NA64

# metrics-table residency accumulator -> AMD throttle reason (the amdsmi_violation_status_t
# "active_*" flag it feeds, by the names the agent has always exported).
RESIDENCY_REASONS: tuple[tuple[str, str], ...] = (
    ("ppt_residency_acc", "ppt_power"),
    ("socket_thm_residency_acc", "socket_thermal"),
    ("vr_thm_residency_acc", "vr_thermal"),
    ("hbm_thm_residency_acc", "hbm_thermal"),
    ("prochot_residency_acc", "prochot"),
)


@dataclass
class ResidencyThrottle:
    """Which throttle reasons were active between the previous table read and this one."""

    _last: dict[str, int] = field(default_factory=dict)

    def readings(self, table: Any) -> tuple[Reading, ...]:
        now = {name: int(getattr(table, name))
               for name in ("accumulation_counter", *(r for r, _ in RESIDENCY_REASONS))}
        last, self._last = self._last, now
        ticks = now["accumulation_counter"]
        if ticks == NA64:
            return status_readings(table)  # no residency accumulators: the status bits
        if "accumulation_counter" not in last:
            return ()
        elapsed = ticks - last["accumulation_counter"]
        if elapsed <= 0:  # no firmware tick between the reads, or the counter restarted
            return ()
        out = []
        for name, reason in RESIDENCY_REASONS:
            before, after = last[name], now[name]
            if NA64 in (before, after) or after < before:
                continue
            out.append(Reading("gpu.clock.throttle", int(after > before),
                               (("gpu.clock.throttle.reason", reason),)))
        return tuple(out)


# SMU_THROTTLER_* bit -> AMD throttle reason (amdgpu_smu.h: PPT0-3, SPL, FPPT, SPPT, SPPT_APU
# 0-7; TEMP_GPU 32, TEMP_CORE 33, TEMP_MEM 34, TEMP_EDGE 35, TEMP_HOTSPOT 36, TEMP_SOC 37,
# TEMP_VR_GFX 38, TEMP_VR_SOC 39, TEMP_VR_MEM0/1 40/41, VRHOT0/1 44/45, PROCHOT_CPU/GFX 46/47).
STATUS_REASONS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("ppt_power", tuple(range(8))),
    ("socket_thermal", (32, 33, 35, 36, 37)),
    ("hbm_thermal", (34,)),
    ("vr_thermal", (38, 39, 40, 41, 44, 45)),
    ("prochot", (46, 47)),
)


def status_readings(table: Any) -> tuple[Reading, ...]:
    """The throttle reasons active now, from ``indep_throttle_status`` (absent where all ones:
    the table has no such field)."""
    bits = int(table.indep_throttle_status)
    if bits in (NA64, 0xFFFF_FFFF):
        return ()
    return tuple(Reading("gpu.clock.throttle", int(any(bits >> b & 1 for b in positions)),
                         (("gpu.clock.throttle.reason", reason),))
                 for reason, positions in STATUS_REASONS)


# A drop to below this fraction of the last value is a restart of the counter (driver reload,
# GPU reset, a firmware that re-bases it); a smaller step back is a glitch of one read.
RESTART_FRACTION = 0.5


@dataclass
class MonotonicCounter:
    """A cumulative counter that never goes backwards on the wire.

    The energy accumulator has been seen going backwards. A restart (the value falls to a
    fraction of what it was) continues the series from where it stood, adding what is counted
    after the restart; a small step back holds the last value until the counter passes it.
    Either way the exported counter never decreases, so a rate over it is never negative.
    """

    _offset: float = 0.0
    _last_raw: float | None = None
    _last_out: float = 0.0

    def update(self, raw: float) -> float:
        last = self._last_raw
        if last is not None and raw < last:
            if raw < last * RESTART_FRACTION:
                self._offset += last  # restarted near zero: carry the total so far
            else:
                self._last_raw = max(last, raw)
                return self._last_out  # a glitch: hold until it counts past the old value
        self._last_raw = raw
        self._last_out = max(self._last_out, raw + self._offset)
        return self._last_out
