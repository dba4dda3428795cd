"""Build the stand-in CUDA runtime, driver and workload program, cached by content.

The three files land in one directory named by a hash of every input (sources, flags,
version scripts, and the CUDA headers when they are used for checking), so the
workload finds both libraries next to itself (RUNPATH ``$ORIGIN``) and a changed input
never reuses a stale build. Compiling and the atomic rename into place are the
simulated node's (``gpu_otel_agent.simulation.core.compiler``): concurrent test processes never
see a half-written file.
"""

from __future__ import annotations

import logging
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.core.compiler import (
    BuildError,
    Generated,
    cache_root,
    compile_cached,
    digest,
    find_compiler,
)
from tests.cuda_standin.toolkit import HEADERS, include_directory

log = logging.getLogger(__name__)

SOURCES = Path(__file__).parent
# The toolkit's headers (NVIDIA's wheels in the dev extras, or /usr/local/cuda), optional:
# when present the sources are compiled against them as well, so a signature that differs
# from the real API is a compile error.
CUDA_INCLUDE = include_directory()
_CHECKED_HEADERS = HEADERS

LIBCUDART = "libcudart.so.12"
LIBCUDA = "libcuda.so.1"
WORKLOAD = "workload"

# Versioned symbols like the real libraries' (cudaMalloc@@libcudart.so.12): a tracer
# resolving symbols must cope with the version suffix.
_CUDART_MAP = f"{LIBCUDART} {{\n  global: cuda*;\n  local: *;\n}};\n"
_CUDA_MAP = f"{LIBCUDA} {{\n  global: cu*; standin*;\n  local: *;\n}};\n"

# Each entry point opens with a nop. The real libcudart's open with `push %rbp`, which the
# kernel's uprobe emulates in place, as it does a nop; left alone, gcc opens a tiny counting
# function with a `lock` instruction, which the kernel refuses to uprobe (ENOTSUPP), and
# control-flow protection's `endbr64` is single-stepped out of line, some 30 times dearer
# (the benchmark measures both entries).
_NOP_ENTRY = ("-fpatchable-function-entry=1",
              *(("-fcf-protection=none",) if platform.machine() == "x86_64" else ()))
_COMMON = ("-O2", "-Wall", "-Wextra", "-fvisibility=hidden", *_NOP_ENTRY)
# The libraries and the program find their libraries in their own directory, wherever
# it is copied (a container's own copy), unless LD_LIBRARY_PATH says otherwise.
_RUNPATH = ("-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags")

__all__ = ["BuildError", "StandinBuild", "build_standin", "header_check_flags"]


@dataclass(frozen=True)
class StandinBuild:
    """The stand-in libraries and workload program, side by side in ``directory``."""

    directory: Path
    libcudart: Path
    libcuda: Path
    workload: Path

    @classmethod
    def at(cls, directory: Path) -> StandinBuild:
        return cls(directory, directory / LIBCUDART, directory / LIBCUDA, directory / WORKLOAD)

    def copy_to(self, directory: Path) -> StandinBuild:
        """The same three files copied into ``directory`` (made if missing): a separate
        copy of the library, as a container image carries its own."""
        directory.mkdir(parents=True, exist_ok=True)
        copy = StandinBuild.at(directory)
        for src, dst in zip(self.files(), copy.files(), strict=True):
            shutil.copy2(src, dst)
        return copy

    def files(self) -> tuple[Path, Path, Path]:
        return (self.libcudart, self.libcuda, self.workload)


def header_check_flags(include: Path | None = CUDA_INCLUDE) -> tuple[str, ...]:
    """Flags that compile the sources against the real CUDA headers, or none when the
    headers are absent (they are optional)."""
    if include is None or not all((include / name).is_file() for name in _CHECKED_HEADERS):
        return ()
    return ("-DSTANDIN_CHECK_HEADERS", f"-I{include}")


def build_standin(include: Path | None = CUDA_INCLUDE,
                  extra_flags: tuple[str, ...] = ()) -> StandinBuild:
    """Build (or reuse) the stand-in; ``include=None`` skips the header check.
    ``extra_flags`` go after the usual ones: a variant (the benchmark builds functions that
    open with a ``nop`` and with ``endbr64``, which uprobes handle at very different cost)."""
    find_compiler()  # fail early with a clear message when there is no compiler
    check = header_check_flags(include)
    headers = [(include / n).read_bytes() for n in _CHECKED_HEADERS] if check and include else []
    check = (*check, *extra_flags)
    key = digest(
        SOURCES / "libcudart.c",
        (*_COMMON, *_RUNPATH, *check),
        (SOURCES / "libcuda.c").read_bytes(),
        (SOURCES / "workload.c").read_bytes(),
        _CUDART_MAP.encode(),
        _CUDA_MAP.encode(),
        *headers,
    )
    out = StandinBuild.at(cache_root() / "cuda-standin" / key)
    if all(path.exists() for path in out.files()):
        return out
    log.info("building the CUDA stand-in into %s", out.directory)
    shared = ("-fPIC", "-shared", *_COMMON, *check)
    # Driver first: nothing links against it (the runtime dlopens it), but the runtime
    # must exist before the workload links against it.
    compile_cached(
        out.libcuda,
        SOURCES / "libcuda.c",
        (*shared, f"-Wl,-soname,{LIBCUDA}"),
        generated=lambda: (Generated(".map", _CUDA_MAP, "-Wl,--version-script={}"),),
        libs=(),
        label=LIBCUDA,
    )
    compile_cached(
        out.libcudart,
        SOURCES / "libcudart.c",
        (*shared, *_RUNPATH, f"-Wl,-soname,{LIBCUDART}"),
        generated=lambda: (Generated(".map", _CUDART_MAP, "-Wl,--version-script={}"),),
        libs=("-ldl", "-lpthread"),  # part of libc since glibc 2.34; needed before
        label=LIBCUDART,
    )
    compile_cached(
        out.workload,
        SOURCES / "workload.c",
        (*_COMMON, *_RUNPATH, *check),
        libs=(f"-L{out.directory}", f"-l:{LIBCUDART}", "-ldl"),
        label="CUDA workload",
    )
    # The compiler's temporary file was made private (0600); other users (a workload run
    # unprivileged) must be able to map and run the files.
    for path in out.files():
        if path.stat().st_mode & 0o777 != 0o755:
            path.chmod(0o755)
    return out
