"""Compile the simulated NVML library from NVIDIA's nvml.h and cache it.

The cache key covers the C source, the header and the omitted-symbol set, so a
changed header or scenario variant never reuses a stale object.  Builds go to a
temporary name and are renamed into place, so concurrent processes never see a
half-written library.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpu_otel_agent.simulation.core.compiler import (
    BuildError,
    Generated,
    cache_root,
    compile_cached,
    digest,
    find_compiler,
)

__all__ = ["SONAME", "SOURCE", "BuildError", "build_library", "cache_root", "find_compiler"]

SOURCE = Path(__file__).with_name("libnvml_sim.c")
# Included by SOURCE (the MIG part); part of the cache key.
INCLUDED = (Path(__file__).with_name("nvml_sim_mig_types.h"),
            Path(__file__).with_name("nvml_sim_mig.c"))
SONAME = "libnvidia-ml.so.1"
_CFLAGS = (
    "-shared",
    "-fPIC",
    "-O2",
    "-Wall",
    "-Wno-deprecated-declarations",
    f"-Wl,-soname,{SONAME}",
)


def find_nvml_header() -> Path:
    """Locate nvml.h inside the installed ``nvidia`` namespace package (nvidia-nvml-dev)."""
    try:
        import nvidia  # type: ignore[import-untyped]
    except ImportError as exc:
        raise BuildError(
            "nvml.h not found: install the 'nvidia-nvml-dev' package (pip install "
            "'gpu-otel-agent[sim]')"
        ) from exc
    candidates: list[Path] = []
    for root in getattr(nvidia, "__path__", []):
        candidates.extend(sorted(Path(root).glob("*/include/nvml.h")))
        candidates.extend(sorted(Path(root).glob("include/nvml.h")))
    if not candidates:
        raise BuildError("nvml.h not found in the installed 'nvidia' package (nvidia-nvml-dev)")
    return candidates[-1]


def build_library(missing_symbols: Iterable[str] = ()) -> Path:
    """Return the path of a built ``libnvidia-ml.so.1``, compiling it on first use.

    ``missing_symbols`` are made local at link time (a version script), so they are
    absent from the dynamic symbol table exactly as on an older driver.
    """
    omit = tuple(sorted(set(missing_symbols)))
    for name in omit:
        if not name.isidentifier():
            raise BuildError(f"invalid symbol name in missing_symbols: {name!r}")
    header = find_nvml_header()
    key = digest(
        SOURCE,
        _CFLAGS,
        header.read_bytes(),
        *(h.read_bytes() for h in sorted(SOURCE.parent.glob("*.h"))),  # nvml_chaos*.h
        "\n".join(omit).encode(),
        *(path.read_bytes() for path in INCLUDED),
    )

    def version_script() -> tuple[Generated, ...]:
        if not omit:
            return ()
        script = "{ local: " + " ".join(f"{n};" for n in omit) + " };\n"
        return (Generated(".map", script, "-Wl,--version-script={}"),)

    return compile_cached(
        cache_root() / key / SONAME,
        SOURCE,
        (*_CFLAGS, f"-I{header.parent}"),
        generated=version_script,
        label="NVML",
    )
