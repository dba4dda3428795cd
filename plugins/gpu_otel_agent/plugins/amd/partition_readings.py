"""What a partition of a partitioned AMD GPU reports, and what only its socket does.

On a partitioned MI300X every partition's handle answers the *socket's* activity and the
*device's* VRAM use: the kernel fills the metrics table's ``average_gfx_activity`` from the
socket's busy counter (``SocketGfxBusy``, smu_v13_0_6_ppt.c) and VRAM use from the device's one
VRAM manager (``AMDGPU_INFO_VRAM_USAGE``); ``amdsmi_get_gpu_activity`` copies the table
(amd_smi.cc at ROCm/amdsmi 0ceca28). AMD's device-metrics-exporter says so too ("amdsmi does not
return per-partition activity data"; ROCm/device-metrics-exporter issue 139: the gfx activity
"has been retired" on partitioning platforms in favour of the per-XCP busy fields). So:

- the socket (``hw.parent``) carries the socket-wide activity and the device's VRAM use and
  total;
- a partition carries ``hw.gpu.utilization`` only where the part measures it per partition: the
  per-XCP ``gfx_busy_inst`` of gpu_metrics v1.6 and later (one value per XCC of the partition;
  amd-smi on a DPX MI300X, ROCm 7.0.2: four values and four N/A per XCP, ROCm/amdsmi issue 134),
  read from XCP 0's table, which holds every partition's stats. On v1.5 and older there is none:
  absent, never the socket's figure under the partition's name;
- a partition's ``hw.gpu.memory.limit`` is its share of the device's VRAM (see
  :func:`vram_totals`), so the partitions' limits never add up to more than the socket's.
  Its ``hw.gpu.memory.usage`` is its own where the library answers it per partition:
  ``amdsmi_get_gpu_memory_usage`` (the DRM node's ``mem_info_vram_used``) on amdsmi 26 and later
  (amd-smi 26.0.0, ROCm 7.0.1: 283 MB and 492 MB on the two partitions of one DPX MI300X,
  ROCm/k8s-gpu-dra-driver issue 20); older libraries are not read for it (on ROCm 6.4 every
  partition shows the device's use, ROCm/ROCm issue 4750). The device's use stays on the socket.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.model.memory import memory_readings
from gpu_otel_agent.model.snapshot import Reading
from gpu_otel_agent.plugins.amd.readings import (
    MIB,
    CallReading,
    Read,
    build_groups,
    metrics_table,
)
from gpu_otel_agent.plugins.amd.sentinels import NA32
from gpu_otel_agent.plugins.amd.smi import number

# gpu_metrics v1.6 brought the per-XCP stats (and the throttle residencies): the kernel's
# kgd_pp_interface.h, "Add new gpu_metrics_v1_6 to acquire accumulated throttler residencies".
XCP_STATS_FROM = 6
MAX_XCP = 8
# amdsmi_get_lib_version from which a partition's VRAM total is its even share: 26.0 (ROCm 7.0;
# 98296 MB on a DPX MI300X's second partition, ROCm/k8s-gpu-dra-driver issue 20). Older
# libraries report the whole device on every partition (ROCm/ROCm issue 4750, ROCm 6.4).
VRAM_SPLIT_FROM = (26, 0)


def xcp_busy(table: Any, partition_id: int) -> float | None:
    """The partition's busy fraction from a v1.6+ table: the mean over its XCCs."""
    if int(table.common_header.content_revision) < XCP_STATS_FROM or not (
            0 <= partition_id < MAX_XCP):
        return None
    values = [int(v) for v in table.xcp_stats[partition_id].gfx_busy_inst]
    valid = [v for v in values if v != NA32 and v <= 100]
    return sum(valid) / len(valid) / 100 if valid else None


# How long one read of XCP 0's table serves the partitions: they are sampled one after another
# in the same round, and eight table reads (sysfs, ~1 ms each) would give the same figures.
TABLE_MAX_AGE_S = 0.1


@dataclass
class SharedTable:
    """XCP 0's metrics table, read once for all partitions of a round."""

    smi: Any
    primary: Any
    clock: Callable[[], float] = time.monotonic
    max_age_s: float = TABLE_MAX_AGE_S
    _table: Any = None
    _at: float = 0.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            now = self.clock()
            if self._table is None or now - self._at > self.max_age_s:
                self._table = metrics_table(self.smi, self.primary)
                self._at = now
            return self._table


def xcp_reader(partition_id: int, table: SharedTable) -> Read:
    """The partition's own activity, read from XCP 0's table."""

    def read(_smi: Any, _handle: Any) -> tuple[Reading, ...]:
        busy = xcp_busy(table.get(), partition_id)
        if busy is None:
            return ()
        return (Reading("hw.gpu.utilization", busy, (("hw.gpu.task", "general"),)),)

    return read


# Partitions a compute mode makes ("On MI300X, SPX: 1, DPX: 2, QPX: 4, CPX: 8": amdsmi's
# amdsmi_accelerator_partition_profile_t). CPX is one partition per XCD: 8 on the 8-XCD parts
# (MI300X, MI325X, MI350X, MI355X); an MI300A has 6 XCDs (its CPX count rests on that reading).
MODE_PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}
CPX_6_XCD = ("AMD Instinct MI300A",)


def mode_partitions(mode: str | None, model: str, visible: int) -> int:
    """How many partitions the socket's mode makes: a node may show fewer (two real 8x MI300X
    CPX nodes list 63 of 64), and a partition's VRAM is its share of the mode's count, as
    KFD's is, not of the partitions that happen to be visible."""
    count = MODE_PARTITIONS.get((mode or "").upper())
    if count == 8 and model.startswith(CPX_6_XCD):
        count = 6
    return max(count or 0, visible)


def vram_totals(totals: Sequence[int], splits: bool,
                partitions: int | None = None) -> tuple[int, tuple[int, ...]]:
    """(the device's VRAM total, each partition's share) from what each partition reports.

    Partitions that disagree: the largest is the whole device (ROCm 7.0.1 reports it on XCP 0
    and the share on the others). Partitions that agree: each reports the whole device on a
    library that does not split (``splits`` False), its share on one that does. A partition
    never gets more than the device divided among the mode's ``partitions`` (default: those
    that report)."""
    count = max(partitions or 0, len(totals))
    device = totals[0] * count if splits else totals[0]
    if len(set(totals)) > 1:
        device = max(totals)
    return device, tuple(t if t * count <= device else device // count for t in totals)


@dataclass
class SocketVram:
    """The VRAM of one partitioned GPU, read through all its partitions' handles."""

    smi: Any
    handles: tuple[Any, ...]  # by partition position, XCP 0 first
    splits: bool
    partitions: int | None = None  # the mode's count (mode_partitions); None: the handles'
    _totals: tuple[int, tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def totals(self) -> tuple[int, tuple[int, ...]]:
        """Read once (the totals do not change while the partitions exist); raises like
        amdsmi until every partition has answered."""
        with self._lock:
            if self._totals is None:
                reported = []
                for handle in self.handles:
                    total = number(self.smi.amdsmi_get_gpu_vram_usage(handle)["vram_total"])
                    if total is None:
                        raise self.smi.AmdSmiLibraryException(self.smi.amdsmi_wrapper.
                                                              AMDSMI_STATUS_NOT_SUPPORTED)
                    reported.append(int(total))
                self._totals = vram_totals(reported, self.splits, self.partitions)
            return self._totals

    def socket_read(self, smi: Any, _handle: Any) -> tuple[Reading, ...]:
        used = number(smi.amdsmi_get_gpu_vram_usage(self.handles[0])["vram_used"])
        # The device's use and total, and so the conventions' usage / limit.
        return memory_readings(None if used is None else int(used) * MIB,
                               self.totals()[0] * MIB)

    def partition_reader(self, position: int) -> Read:
        def read(_smi: Any, _handle: Any) -> tuple[Reading, ...]:
            return (Reading("hw.gpu.memory.limit", self.totals()[1][position] * MIB),)

        return read


# amdsmi_get_lib_version from which amdsmi_get_gpu_memory_usage answers a partition's own use.
PARTITION_MEMORY_FROM = (26, 0)


def partition_memory_reader(enabled: bool) -> Read:
    """A partition's own VRAM use (bytes); nothing where the library does not give it."""

    def read(smi: Any, handle: Any) -> tuple[Reading, ...]:
        if not enabled:
            return ()
        used = number(smi.amdsmi_get_gpu_memory_usage(handle, smi.AmdSmiMemoryType.VRAM))
        return () if used is None else (Reading("hw.gpu.memory.usage", float(used)),)

    return read


def library_at_least(smi: Any, version: tuple[int, int]) -> bool:
    try:
        found = smi.amdsmi_get_lib_version()
        return (int(found["major"]), int(found["minor"])) >= version
    except (smi.AmdSmiException, KeyError, TypeError, ValueError):
        return True  # the libraries deployed today (ROCm 7)


def library_splits(smi: Any) -> bool:
    """Whether this library reports a partition's VRAM total as its share."""
    return library_at_least(smi, VRAM_SPLIT_FROM)


def socket_groups(vram: SocketVram) -> dict[str, tuple[CallReading, ...]]:
    """The socket's calls: the whole GPU's (read through XCP 0), its VRAM over all partitions."""
    groups = build_groups()
    return {name: tuple(CallReading(c.name, vram.socket_read, c.fallback)
                        if c.name == "amdsmi_get_gpu_vram_usage" else c for c in calls)
            for name, calls in groups.items()}


def partition_groups(partition_id: int, position: int, table: SharedTable,
                     vram: SocketVram, own_memory: bool = False
                     ) -> dict[str, tuple[CallReading, ...]]:
    """A partition's calls: its own activity (v1.6+ tables), its VRAM share and (``own_memory``:
    a library that answers it per partition) its own VRAM use."""
    return {
        "fast": (CallReading("amdsmi_get_gpu_metrics_info", xcp_reader(partition_id, table)),),
        "slow": (CallReading("amdsmi_get_gpu_vram_usage", vram.partition_reader(position)),
                 CallReading("amdsmi_get_gpu_memory_usage",
                             partition_memory_reader(own_memory))),
    }
