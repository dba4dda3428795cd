"""One glibc malloc arena for the whole agent, set before its threads start, and a fixed mmap
threshold.

glibc gives each thread that allocates while another holds an arena's lock an arena of its own
(up to 8 per core), and memory freed in one arena is never reused by another. The agent runs
about two dozen threads (a worker and an event waiter per GPU, export, events, the local
endpoint), but Python allocates under the GIL, so one thread at a time: separate arenas buy
little concurrency and cost resident memory. Measured on agent-8gpu-1s (issue 41, peak RSS
over 10 s, three runs each): 49.6 MiB with glibc's default, 48.8 with one arena, 49.0 with two.

``mallopt(M_ARENA_MAX, n)`` is glibc's public interface for this (the ``MALLOC_ARENA_MAX``
environment variable sets the same and wins: an operator's own setting is kept). Elsewhere
(musl, no ``mallopt``) nothing is done.

The mmap threshold is held at glibc's own starting value (128 KiB) too. glibc raises it to
the size of every mmapped block freed (up to 32 MiB), and the heap's trim threshold to twice
that: after the first export of a large node its requests, metric bytes and template tables
(megabytes, freed export after export) come from the heap, and the heap keeps up to twice the
largest of them resident when they are freed. Held, blocks above 128 KiB are mmapped and
given back when freed, and the heap is trimmed above 128 KiB free at its top. Measured on
8 GPUs x 2,048 processes (a 3.4 MB request each second, issue 41): peak RSS 80.3 -> 75.7 MiB
and the steady resident set 4-5 MiB lower, for about 1,100 minor page faults a second (the
pages of the mmapped blocks, touched anew each export) instead of 50. ``mallopt
(M_MMAP_THRESHOLD)`` is glibc's public interface; ``MALLOC_MMAP_THRESHOLD_`` or any other of
the environment variables that fix glibc's thresholds wins.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
ARENAS = 1
MMAP_THRESHOLD = 128 * 1024  # glibc's DEFAULT_MMAP_THRESHOLD_MIN, its starting value
# Each fixes glibc's thresholds (no more raising them): an operator's choice is kept.
_THRESHOLD_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                        "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def limit_malloc_arenas(environ: Mapping[str, str] | None = None) -> bool:
    """Limit glibc to ``ARENAS`` arenas; True when it took the setting. Call it before any
    thread starts: arenas already made are kept."""
    env = os.environ if environ is None else environ
    if "MALLOC_ARENA_MAX" in env:
        return False
    return _mallopt("M_ARENA_MAX", M_ARENA_MAX, ARENAS)


def hold_mmap_threshold(environ: Mapping[str, str] | None = None) -> bool:
    """Hold glibc's mmap threshold at ``MMAP_THRESHOLD`` (see the module's docstring); True
    when it took the setting."""
    env = os.environ if environ is None else environ
    if any(name in env for name in _THRESHOLD_VARIABLES):
        return False
    return _mallopt("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def _mallopt(name: str, option: int, value: int) -> bool:
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    taken = bool(mallopt(option, value))
    if not taken:
        log.debug("mallopt(%s, %d) was refused", name, value)
    return taken
