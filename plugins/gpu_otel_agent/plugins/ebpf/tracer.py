"""The loaded BPF object: its maps, its lifecycle tracepoints and its ring buffer.

Everything here is a direct libbpf call. What the agent makes of it (which libraries to trace,
readings, containers) is in :mod:`gpu_otel_agent.plugins.ebpf.activity`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from gpu_otel_agent.plugins.ebpf.layout import (
    WATCHED_PIDS,
    Counter,
    CudaStats,
    CudaStatsStruct,
    LibraryFileStruct,
    SettingsStruct,
)
from gpu_otel_agent.plugins.ebpf.libbpf import BpfObject, Link, Program, RingBuffer
from gpu_otel_agent.plugins.ebpf.libraries import LibraryFile, MappedLibrary, mapped_files
from gpu_otel_agent.plugins.ebpf.symbols import PROGRAMS

LIFECYCLE_PROGRAMS = ("process_exec", "process_exit")
# A function in libbpf itself, which nothing calls: where a trial uprobe shows at start-up
# whether this process may create uprobes at all (one clear reason instead of a failure per
# CUDA library later).
TRIAL_FUNCTION = "libbpf_major_version"


class Tracer:
    """Opens, sizes and loads the object and attaches the lifecycle tracepoints. Raises
    :class:`~gpu_otel_agent.plugins.ebpf.libbpf.BpfError` (or OSError for a missing libbpf) on
    failure."""

    def __init__(self, path: Path, max_allocations: int,
                 on_record: Callable[[bytes], None]) -> None:
        self._object = BpfObject(path)
        self._links: list[Link] = []
        try:
            self._object.map("allocations").set_max_entries(max_allocations)
            self._object.load()
            self._programs = {name: self._object.program(name) for name in PROGRAMS}
            self._stats = self._object.map("stats")
            self._counters = self._object.map("counters")
            self._settings = self._object.map("settings")
            self._runtime_files = self._object.map("runtime_files")
            self._watched_map = self._object.map("watched_pids")
            self._watched: set[int] = set()
            self.ring: RingBuffer = self._object.ring_buffer("events", on_record)
            for name in LIFECYCLE_PROGRAMS:
                self._links.append(self._object.program(name).attach())
            self._try_a_uprobe()
        except BaseException:
            self.close()
            raise

    def _try_a_uprobe(self) -> None:
        library = _mapped_file("libbpf.so")
        if library is None:
            return  # not mapped from a file we can name: the first CUDA library will tell
        self._programs["runtime_graph"].attach_uprobe(library, TRIAL_FUNCTION).destroy()

    def attach_uprobe(self, program: str, library: MappedLibrary, function: str,
                      retprobe: bool) -> Link:
        chosen: Program = self._programs[program]
        return chosen.attach_uprobe(library.path, function, retprobe=retprobe)

    def mark_runtime(self, file: LibraryFile, traced: bool) -> None:
        """Driver calls made from code in ``file`` are the runtime's own (not counted twice)."""
        key = LibraryFileStruct(file.kernel_device, file.inode)
        if traced:
            self._runtime_files.update(key, ctypes.c_uint8(1))
        else:
            self._runtime_files.delete(key)

    def stats(self, pid: int) -> CudaStats | None:
        raw = CudaStatsStruct()
        return CudaStats.of(raw) if self._stats.lookup(ctypes.c_uint32(pid), raw) else None

    def pids(self) -> list[int]:
        """Every process with counters in the map (each read is a syscall: for cleanup only)."""
        return list(self._stats.keys(ctypes.c_uint32))

    def forget(self, pids: Iterable[int]) -> None:
        for pid in pids:
            self._stats.delete(ctypes.c_uint32(pid))

    def counter(self, which: Counter) -> int:
        value = ctypes.c_uint64()
        return value.value if self._counters.lookup(ctypes.c_uint32(which), value) else 0

    def send_lifecycle_events(self, on: bool, pids: Collection[int] | None = None) -> None:
        """On: exec/exit for the resolver, of ``pids`` only (checked in the kernel against the
        ``watched_pids`` map, so other processes' events never reach the ring buffer), or of
        every process (None, or more PIDs than the map holds). Off: only of CUDA users."""
        if on and pids is not None and len(pids) <= WATCHED_PIDS:
            wanted = set(pids)
            for pid in self._watched - wanted:
                self._watched_map.delete(ctypes.c_uint32(pid))
            for pid in wanted - self._watched:
                self._watched_map.update(ctypes.c_uint32(pid), ctypes.c_uint8(1))
            self._watched = wanted
            self._settings.update(ctypes.c_uint32(0), SettingsStruct(0, 1))
            return
        self._settings.update(ctypes.c_uint32(0), SettingsStruct(int(on), 0))

    def close(self) -> None:
        for link in self._links:
            link.destroy()
        self._links.clear()
        ring = getattr(self, "ring", None)
        if ring is not None:
            ring.free()
        self._object.close()


def _mapped_file(name: str) -> Path | None:
    """The file of a library this process maps, by the start of its name."""
    maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="surrogateescape")
    return next((Path(path) for _, path in mapped_files(maps)
                 if path.rsplit("/", 1)[-1].startswith(name)), None)
