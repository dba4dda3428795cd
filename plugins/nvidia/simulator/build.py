"""Compile the simulated NVML library from NVIDIA's nvml.h and cache it.

The cache key covers the C source, the header and the omitted-symbol set, so a
changed header or scenario variant never reuses a stale object.  Builds go to a
temporary name and are renamed into place, so concurrent processes never see a
half-written library.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("libnvml_sim.c")
SONAME = "libnvidia-ml.so.1"
_CFLAGS = (
    "-shared",
    "-fPIC",
    "-O2",
    "-Wall",
    "-Wno-deprecated-declarations",
    f"-Wl,-soname,{SONAME}",
)


class BuildError(RuntimeError):
    """The simulated library cannot be built on this machine."""


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


def find_compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and (path := shutil.which(name)):
            return path
    raise BuildError("no C compiler found (need cc, gcc or clang; or set $CC)")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-otel-agent" / "simnode"


def _digest(header: Path, omit: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    h.update(SOURCE.read_bytes())
    h.update(b"\0")
    h.update(header.read_bytes())
    h.update(b"\0")
    h.update("\n".join(omit).encode())
    h.update(b"\0")
    h.update(" ".join(_CFLAGS).encode())
    return h.hexdigest()[:20]


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
    out_dir = cache_root() / _digest(header, omit)
    lib = out_dir / SONAME
    if lib.exists():
        return lib
    cc = find_compiler()
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [cc, *_CFLAGS, f"-I{header.parent}", str(SOURCE), "-o", str(tmp), "-lm"]
    script: Path | None = None
    if omit:
        sfd, script_name = tempfile.mkstemp(prefix=".omit-", suffix=".map", dir=out_dir)
        with os.fdopen(sfd, "w") as fh:
            fh.write("{ local: " + " ".join(f"{n};" for n in omit) + " };\n")
        script = Path(script_name)
        cmd.insert(-3, f"-Wl,--version-script={script}")
    log.info("building simulated NVML: %s", " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise BuildError(f"compiling {SOURCE.name} failed:\n{proc.stderr.strip()}")
        tmp.replace(lib)
    finally:
        tmp.unlink(missing_ok=True)
        if script is not None:
            script.unlink(missing_ok=True)
    return lib
