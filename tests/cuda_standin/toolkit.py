"""Where NVIDIA's real CUDA runtime and headers are on this machine, if anywhere.

Tests use them as an independent reference: the stand-in's sources are compiled against the
real headers (a wrong signature is a compile error) and the eBPF plugin attaches to the real
``libcudart`` (every function it traces must be there). Two places are looked at, in order:

- NVIDIA's own wheels from PyPI, in the dev extras: ``nvidia-cuda-runtime`` ships
  ``nvidia/cu13/lib/libcudart.so.13`` and ``nvidia/cu13/include/{cuda.h,cuda_runtime_api.h}``;
  ``cuda_runtime_api.h`` includes ``crt/host_defines.h``, which ``nvidia-cuda-crt`` ships into
  the same ``include`` directory. Found through the distributions' own file lists
  (importlib.metadata), so a machine without ``/usr/local/cuda`` still has them.
- a CUDA toolkit installed the usual way, under ``/usr/local/cuda*``.
"""

from __future__ import annotations

import glob
import re
from importlib import metadata
from pathlib import Path

RUNTIME_DISTRIBUTION = "nvidia-cuda-runtime"
SYSTEM_INCLUDE = Path("/usr/local/cuda/include")
HEADERS = ("cuda.h", "cuda_runtime_api.h")
# What cuda_runtime_api.h includes from the crt/ directory (nvidia-cuda-crt's since CUDA 13).
_CRT_HEADER = Path("crt") / "host_defines.h"
_RUNTIME_SONAME = re.compile(r"libcudart\.so\.\d+$")

__all__ = ["HEADERS", "include_directory", "runtime_library"]


def _wheel_files() -> list[Path]:
    try:
        dist = metadata.distribution(RUNTIME_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return []
    return [Path(str(dist.locate_file(f))) for f in dist.files or ()]


def include_directory() -> Path | None:
    """A directory holding every header in ``HEADERS`` and what they include, or None."""
    candidates = [f.parent for f in _wheel_files() if f.name == "cuda_runtime_api.h"]
    candidates.append(SYSTEM_INCLUDE)
    for directory in candidates:
        if all((directory / name).is_file() for name in HEADERS) and (
                directory / _CRT_HEADER).is_file():
            return directory
    return None


def runtime_library() -> Path | None:
    """The real CUDA runtime shared library (``libcudart.so.N``), or None."""
    wheel = sorted(f for f in _wheel_files() if _RUNTIME_SONAME.match(f.name) and f.is_file())
    if wheel:
        return wheel[-1]
    found = sorted(glob.glob("/usr/local/cuda*/lib*/libcudart.so.*[0-9]"))
    return Path(found[-1]) if found else None
