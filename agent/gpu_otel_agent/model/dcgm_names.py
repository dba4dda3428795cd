"""dcgm-exporter 4.9's names: the one table the ``dcgm`` (dcgm-exporter <= 4.8) and
``dcgm-4.9`` (>= 4.9) Prometheus schemes and ``docs/migration.md`` are made from.

dcgm-exporter 4.9.0 (paired with DCGM 4.7.0; release notes of NVIDIA/dcgm-exporter 4.9.0)
"renames the 23 default and profiling-preset fields that DCGM 4.7 deprecates to their new DCGM
4.7 names. Eleven of them also change unit: clocks from MHz to hertz, energy from millijoules
to joules, utilization from a percentage to a 0 to 1 ratio, GPU memory from MiB to bytes, and
NVLink throughput from MB/s to bytes per second", renames the driver-version label
``DCGM_FI_DRIVER_VERSION`` to ``DCGM_FI_SYSTEM_DRIVER_VERSION`` and collects
``DCGM_FI_DEV_FB_CAPACITY_BYTES`` by default.

The 23 are the rows of dcgm-exporter 4.8's ``etc/default-counters.csv`` (identical to its
``dcp-metrics-included.csv``; tag 4.5.3-4.8.2 and main of 2026-05) whose field DCGM renames:
22 metric rows and the driver label. Eleven change unit, exactly the five kinds listed. Where
each new name comes from is said per row (:class:`Source`): DCGM 4.6.0's ``dcgm_fields.h``
already carries most of them as the targets of its deprecated aliases ("renamed per DCGM Field
Naming Standard"); the unit-changing ones are not in any public DCGM header or dcgm-exporter
CSV we could read (NVIDIA/DCGM ends at 4.6.0, NVIDIA/dcgm-exporter at 4.5.3-4.8.2, and the Go
module proxy does not serve go-dcgm 1.47xx), so their names are composed with DCGM's own
grammar (``dcgmlib/dcgm_field_naming.py``: ``DCGM_FI_<domain>_<subsystem>_<property>[_<unit>]
[_<suffix>]``, units ``BYTES``/``HERTZ``/``JOULES``, suffixes ``RATIO``/``TOTAL``), checked
against the names a DCGM 4.7 host does list (``DCGM_FI_DEV_FB_CAPACITY_BYTES`` in the release
notes; ``DCGM_FI_DEV_BAR1_{CAPACITY,USED,FREE}_BYTES`` in a field list verified on an RTX PRO
4000 Blackwell with DCGM 4.7, Axiumine/Grafana-NVIDIA-GPU-DCGM-Ultimate-Dashboard
custom-counters.csv). Those rows wait for a dcgm-exporter 4.9 CSV or scrape to confirm them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

MIB = 1024 * 1024


class Source(enum.Enum):
    """Where a row's new name (and unit) is read from."""

    # DCGM 4.6.0 dcgmlib/dcgm_fields.h, "Deprecated: renamed per DCGM Field Naming Standard":
    # ``#define <old> <new>``, the same field id.
    HEADER = "DCGM 4.6.0 dcgm_fields.h deprecated alias"
    # dcgm-exporter 4.9.0's release notes name it.
    RELEASE_NOTES = "dcgm-exporter 4.9.0 release notes"
    # Composed with DCGM's naming grammar (dcgm_field_naming.py): not yet seen in a 4.9 CSV.
    GRAMMAR = "composed with dcgmlib/dcgm_field_naming.py (unconfirmed)"


@dataclass(frozen=True)
class DcgmRename:
    """One field dcgm-exporter serves under another name from 4.9 on."""

    old: str  # dcgm-exporter <= 4.8's name
    new: str  # dcgm-exporter >= 4.9's name
    field_id: int  # the DCGM field id (dcgm_fields.h), the same under both names
    source: Source
    factor: float = 1  # a >= 4.9 value is the <= 4.8 value times this
    unit_before: str = ""
    unit_after: str = ""
    label: bool = False  # a label on every device series, not a series of its own
    default: bool = True  # one of dcgm-exporter 4.8's default rows (the 23)
    note: str = ""

    @property
    def unit_changed(self) -> bool:
        return self.factor != 1


def _r(old: str, new: str, field_id: int, source: Source,
       change: tuple[float, str, str] = (1, "", ""), *, label: bool = False,
       default: bool = True, note: str = "") -> DcgmRename:
    """A row; ``change`` is (factor, unit before, unit after) where the unit changed."""
    factor, before, after = change
    return DcgmRename(old, new, field_id, source, factor, before, after, label, default, note)


_H, _N, _G = Source.HEADER, Source.RELEASE_NOTES, Source.GRAMMAR
_CLOCK = (1e6, "MHz", "Hz")
_UTIL = (0.01, "%", "1")
_MEMORY = (MIB, "MiB", "By")

RENAMES_49: tuple[DcgmRename, ...] = (
    _r("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ", 100, _G, _CLOCK),
    _r("DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", 101, _G, _CLOCK,
       note="MEMORY as a subsystem (dcgm_field_naming.py)."),
    _r("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", 140, _H),
    _r("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", 150, _H),
    _r("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS", 155, _H),
    _r("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_BOARD_ENERGY_JOULES_TOTAL", 156,
       _G, (1e-3, "mJ", "J"), note="BOARD as the power fields' subsystem."),
    _r("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 202, _H),
    _r("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO", 203, _H, _UTIL,
       note="Name from the header; the 0-1 unit from the release notes (DCGM 4.6.0's cache "
            "manager still stores NVML's 0-100 under the new name)."),
    _r("DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_MEMORY_COPY_UTIL_RATIO", 204, _G, _UTIL),
    _r("DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_ENC_UTIL_RATIO", 206, _G, _UTIL),
    _r("DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_DEC_UTIL_RATIO", 207, _G, _UTIL),
    _r("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", 230, _H,
       note="Not served by the agent in either scheme: it holds only the last code; "
            "gpu_xid_errors_total counts each."),
    _r("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE_BYTES", 251, _G, _MEMORY),
    _r("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED_BYTES", 252, _G, _MEMORY),
    _r("DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_RESERVED_BYTES", 253, _G, _MEMORY),
    _r("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", 449, _H,
       (1e6, "MB/s", "By/s"),
       note="Name from the header alias; the unit change from the release notes, which may "
            "have come with another name. Not served by the agent (per-link NVLink series "
            "keep their OpenTelemetry names)."),
    _r("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
       393, _H),
    _r("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
       394, _H),
    _r("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED", 395, _H),
    _r("DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION", 1, _N, label=True,
       note="Also the header's alias."),
    _r("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", 1001, _H,
       note="Already a 0-1 ratio. Not served by the agent (no graphics-engine reading)."),
    _r("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO", 1004, _H,
       note="Already a 0-1 ratio."),
    _r("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO", 1005, _H,
       note="Already a 0-1 ratio."),
    # Not one of 4.8's defaults: the agent's dcgm scheme serves the total as FB_TOTAL; 4.9
    # collects the total by default under this name.
    _r("DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_CAPACITY_BYTES", 250, _N, _MEMORY,
       default=False,
       note="4.9 collects the total by default under this name; 4.8 did not collect it."),
)

BY_OLD: Mapping[str, DcgmRename] = MappingProxyType({r.old: r for r in RENAMES_49})
