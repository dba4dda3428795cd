"""Which CUDA functions are traced, by which BPF program, in which library.

Signatures the programs rely on (argument 1 and 2, the return value) are those of the CUDA
runtime and driver APIs: ``cudaMalloc(void **ptr, size_t size)``,
``cuMemAlloc_v2(CUdeviceptr *ptr, size_t size)``, ``cudaFree(void *ptr)``,
``cuMemFree_v2(CUdeviceptr ptr)`` and the ``*Async`` / ``*Managed`` variants with the same
first two arguments. ``_ptsz`` are the per-thread-default-stream entry points. A library that
lacks a function (an older CUDA) just has fewer probes.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class LibraryKind(enum.Enum):
    RUNTIME = "libcudart"
    DRIVER = "libcuda"


@dataclass(frozen=True)
class Probe:
    function: str
    program: str
    retprobe: bool = False


def _each(functions: str, *probes: tuple[str, bool]) -> tuple[Probe, ...]:
    return tuple(Probe(f, program, ret) for f in functions.split() for program, ret in probes)


_ENTRY = False
_RETURN = True

RUNTIME_PROBES: tuple[Probe, ...] = (
    *_each("cudaLaunchKernel cudaLaunchKernel_ptsz cudaLaunchKernelExC "
           "cudaLaunchKernelExC_ptsz cudaLaunchCooperativeKernel "
           "cudaLaunchCooperativeKernel_ptsz", ("runtime_launch", _ENTRY)),
    *_each("cudaGraphLaunch cudaGraphLaunch_ptsz", ("runtime_graph", _ENTRY)),
    *_each("cudaMalloc cudaMallocManaged cudaMallocAsync cudaMallocAsync_ptsz",
           ("runtime_alloc", _ENTRY), ("runtime_alloc_ret", _RETURN)),
    *_each("cudaFree cudaFreeAsync cudaFreeAsync_ptsz", ("runtime_free", _ENTRY)),
    *_each("cudaStreamSynchronize cudaStreamSynchronize_ptsz cudaDeviceSynchronize "
           "cudaEventSynchronize", ("runtime_sync", _ENTRY), ("runtime_sync_ret", _RETURN)),
)

DRIVER_PROBES: tuple[Probe, ...] = (
    *_each("cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx cuLaunchKernelEx_ptsz "
           "cuLaunchCooperativeKernel cuLaunchCooperativeKernel_ptsz",
           ("driver_launch", _ENTRY)),
    *_each("cuGraphLaunch cuGraphLaunch_ptsz", ("driver_graph", _ENTRY)),
    *_each("cuMemAlloc_v2 cuMemAllocManaged cuMemAllocAsync cuMemAllocAsync_ptsz",
           ("driver_alloc", _ENTRY), ("driver_alloc_ret", _RETURN)),
    *_each("cuMemFree_v2 cuMemFreeAsync cuMemFreeAsync_ptsz", ("driver_free", _ENTRY)),
    *_each("cuStreamSynchronize cuStreamSynchronize_ptsz cuCtxSynchronize cuEventSynchronize",
           ("driver_sync", _ENTRY), ("driver_sync_ret", _RETURN)),
)

PROBES = {LibraryKind.RUNTIME: RUNTIME_PROBES, LibraryKind.DRIVER: DRIVER_PROBES}
PROGRAMS = sorted({p.program for probes in PROBES.values() for p in probes})

# libcudart.so, libcudart.so.12, libcudart.so.12.4.127; libcuda.so, libcuda.so.1, libcuda.so.580.
_NAMES = ((re.compile(r"libcudart\.so(\.\d+)*"), LibraryKind.RUNTIME),
          (re.compile(r"libcuda\.so(\.\d+)*"), LibraryKind.DRIVER))


def library_kind(file_name: str) -> LibraryKind | None:
    """The CUDA library a file name is, if any (by the loader's naming convention)."""
    for pattern, kind in _NAMES:
        if pattern.fullmatch(file_name):
            return kind
    return None
