"""Compile a simulated GPU library against ``simcore.h`` and cache it.

Both simulated libraries (NVML, AMD SMI) are built the same way: the cache key covers
every input (the vendor's C source, ``simcore.h``, flags and whatever else the vendor
adds), and a build goes to a temporary name that is renamed into place, so concurrent
processes never see a half-written library.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CORE_DIR = Path(__file__).parent


class BuildError(RuntimeError):
    """The simulated library cannot be built on this machine."""


@dataclass(frozen=True)
class Generated:
    """A file written next to the build for one compile, e.g. generated stubs.

    ``arg`` is how the compiler gets it, ``{}`` standing for its path.
    """

    suffix: str
    text: str
    arg: str = "{}"


def find_compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and (path := shutil.which(name)):
            return path
    raise BuildError("no C compiler found (need cc, gcc or clang; or set $CC)")


_fallback_said: set[Path] = set()


def cache_root() -> Path:
    """``$XDG_CACHE_HOME`` (else ``~/.cache``) ``/gpu-otel-agent/simnode``; where that cannot
    be written (a user whose home is not theirs, a read-only home), a private temporary cache
    of this user's, said once in the log."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    preferred = base / "gpu-otel-agent" / "simnode"
    problem = _unwritable(preferred)
    if problem is None:
        return preferred
    fallback = _private_temporary() / "simnode"
    if fallback not in _fallback_said:
        _fallback_said.add(fallback)
        # INFO: it works as it is; `top` repeats warnings on its one status line, where why
        # the processes show no pods matters more.
        log.info("the compiled-library cache %s cannot be written (%s); using a private "
                    "temporary cache %s (set XDG_CACHE_HOME to a directory of yours to keep the "
                    "build elsewhere)", preferred, problem, fallback)
    return fallback


def _unwritable(directory: Path) -> str | None:
    """Why ``directory`` cannot hold a build (None: it can)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return error.strerror or str(error)
    if not os.access(directory, os.W_OK | os.X_OK):
        return "not writable"
    return None


def _private_temporary() -> Path:
    """``$TMPDIR/gpu-otel-agent-cache-UID``: made 0700 by this user, or refused if anyone else
    made it (another user could otherwise plant the library this process loads)."""
    path = Path(tempfile.gettempdir()) / f"gpu-otel-agent-cache-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
            or info.st_mode & 0o077:
        raise BuildError(f"no cache for the compiled simulated library: the home's cannot be "
                         f"written, and {path} is not a private directory of this user's; set "
                         f"XDG_CACHE_HOME to a directory of yours")
    return path


def digest(source: Path, cflags: Sequence[str], *extra: bytes) -> str:
    """Cache key of a library built from ``source`` (and the core headers) with ``cflags``."""
    headers = (path.read_bytes() for path in sorted(CORE_DIR.glob("*.h")))
    h = hashlib.sha256()
    for part in (source.read_bytes(), *headers, " ".join(cflags).encode(), *extra):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:20]


def compile_cached(
    lib: Path,
    source: Path,
    cflags: Sequence[str],
    *,
    generated: Callable[[], Sequence[Generated]] = tuple,
    libs: Sequence[str] = ("-lm",),
    label: str,
) -> Path:
    """``lib``, compiling ``source`` (with the core headers on the include path) if it is absent.

    ``generated`` is called only when a build is needed (generating may be costly).
    """
    if lib.exists():
        return lib
    cc = find_compiler()
    out_dir = lib.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    temps: list[Path] = []
    try:
        args: list[str] = []
        for gen in generated():
            gfd, gen_name = tempfile.mkstemp(prefix=".gen-", suffix=gen.suffix, dir=out_dir)
            with os.fdopen(gfd, "w") as fh:
                fh.write(gen.text)
            temps.append(Path(gen_name))
            args.append(gen.arg.format(gen_name))
        cmd = [cc, *cflags, f"-I{CORE_DIR}", str(source), *args, "-o", str(tmp), *libs]
        log.info("building simulated %s: %s", label, " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise BuildError(f"compiling {source.name} failed:\n{proc.stderr.strip()}")
        tmp.replace(lib)
    finally:
        tmp.unlink(missing_ok=True)
        for path in temps:
            path.unlink(missing_ok=True)
    return lib
