"""The C layouts of bpf/cuda_activity.h, as ctypes structures and frozen dataclasses.

A unit test compiles the header and compares sizes and offsets, so the two cannot drift apart.
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
from dataclasses import dataclass


class CudaStatsStruct(ctypes.Structure):
    _fields_ = (
        ("kernel_launches", ctypes.c_uint64),
        ("graph_launches", ctypes.c_uint64),
        ("sync_ns", ctypes.c_uint64),
        ("syncs", ctypes.c_uint64),
        ("allocated", ctypes.c_int64),
        ("peak", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("frees", ctypes.c_uint64),
        ("untracked_frees", ctypes.c_uint64),
    )


class LibraryFileStruct(ctypes.Structure):
    _fields_ = (("device", ctypes.c_uint64), ("inode", ctypes.c_uint64))


class LifecycleEventStruct(ctypes.Structure):
    _fields_ = (
        ("kind", ctypes.c_uint32),
        ("tgid", ctypes.c_uint32),
        ("has_stats", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("stats", CudaStatsStruct),
    )


class SettingsStruct(ctypes.Structure):
    _fields_ = (("lifecycle_all", ctypes.c_uint32), ("lifecycle_watched", ctypes.c_uint32))


WATCHED_PIDS = 16384  # cuda_activity.h: entries of the watched_pids map


class Counter(enum.IntEnum):
    """Indexes of the ``counters`` map."""

    EVENTS_LOST = 0
    ALLOCATIONS_FULL = 1
    PENDING_FULL = 2


@dataclass(frozen=True)
class CudaStats:
    """One process's CUDA activity since its probes were attached."""

    kernel_launches: int = 0
    graph_launches: int = 0
    sync_ns: int = 0
    syncs: int = 0
    allocated: int = 0  # bytes held now
    peak: int = 0
    allocations: int = 0
    frees: int = 0
    untracked_frees: int = 0

    @classmethod
    def of(cls, raw: CudaStatsStruct) -> CudaStats:
        return cls(raw.kernel_launches, raw.graph_launches, raw.sync_ns, raw.syncs,
                   max(raw.allocated, 0), raw.peak, raw.allocations, raw.frees,
                   raw.untracked_frees)

    def plus(self, other: CudaStats) -> CudaStats:
        """Field by field: counters and the memory held add up over a container's processes
        (their sum of peaks is not a peak, and is not reported)."""
        return CudaStats(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                 dataclasses.astuple(other), strict=True)))


class EventKind(enum.IntEnum):
    EXEC = 1
    EXIT = 2


@dataclass(frozen=True)
class LifecycleEvent:
    kind: EventKind
    pid: int
    final: CudaStats | None  # the process's counters, handed over as it left the map

    @classmethod
    def decode(cls, record: bytes) -> LifecycleEvent | None:
        """None for a record that is not a whole event of a known kind."""
        if len(record) < ctypes.sizeof(LifecycleEventStruct):
            return None
        raw = LifecycleEventStruct.from_buffer_copy(record)
        if raw.kind not in (EventKind.EXEC, EventKind.EXIT):
            return None
        final = CudaStats.of(raw.stats) if raw.has_stats else None
        return cls(EventKind(raw.kind), raw.tgid, final)
