"""One glibc malloc arena for the whole agent, set before its threads start.

glibc gives each thread that allocates while another holds an arena's lock an arena of its own
(up to 8 per core), and memory freed in one arena is never reused by another. The agent runs
about two dozen threads (a worker and an event waiter per GPU, export, events, the local
endpoint), but Python allocates under the GIL, so one thread at a time: separate arenas buy
little concurrency and cost resident memory. Measured on agent-8gpu-1s (issue 41, peak RSS
over 10 s, three runs each): 49.6 MiB with glibc's default, 48.8 with one arena, 49.0 with two.

``mallopt(M_ARENA_MAX, n)`` is glibc's public interface for this (the ``MALLOC_ARENA_MAX``
environment variable sets the same and wins: an operator's own setting is kept). Elsewhere
(musl, no ``mallopt``) nothing is done.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 1


def limit_malloc_arenas(environ: Mapping[str, str] | None = None) -> bool:
    """Limit glibc to ``ARENAS`` arenas; True when it took the setting. Call it before any
    thread starts: arenas already made are kept."""
    env = os.environ if environ is None else environ
    if "MALLOC_ARENA_MAX" in env:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    taken = bool(mallopt(M_ARENA_MAX, ARENAS))
    if not taken:
        log.debug("mallopt(M_ARENA_MAX, %d) was refused", ARENAS)
    return taken
