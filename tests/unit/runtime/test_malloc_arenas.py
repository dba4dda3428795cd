"""The agent's malloc arena limit: taken by glibc in a fresh process, an operator's own
``MALLOC_ARENA_MAX`` left alone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from gpu_otel_agent.runtime.malloc_arenas import hold_mmap_threshold, limit_malloc_arenas

PROBE = """
import threading
from gpu_otel_agent.runtime.malloc_arenas import hold_mmap_threshold, limit_malloc_arenas
print(limit_malloc_arenas())
# Threads still allocate and free with one arena (the main heap, shared under its lock).
def work():
    blobs = [bytearray(4096) for _ in range(2000)]
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_the_limit_in_a_fresh_process() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, check=False,
                          env={k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]


def test_an_operators_malloc_arena_max_is_kept() -> None:
    assert limit_malloc_arenas({"MALLOC_ARENA_MAX": "4"}) is False


# A large block freed, then one a little smaller: with glibc's threshold held, the second is
# mmapped too (given back when freed); left to glibc, the first free raised the threshold and
# the second comes from the heap, which keeps it resident after it is freed.
THRESHOLD_PROBE = """
import ctypes, sys
from gpu_otel_agent.runtime.malloc_arenas import hold_mmap_threshold
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
held = hold_mmap_threshold() if sys.argv[1] == "hold" else None
first = bytes(4_000_000)
del first
before = libc.mallinfo2().hblkhd
second = bytes(3_900_000)
print(held, libc.mallinfo2().hblkhd - before >= 3_900_000)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
@pytest.mark.parametrize(("mode", "mmapped"), [("hold", "True"), ("glibc", "False")])
def test_a_held_threshold_mmaps_large_blocks_after_one_was_freed(mode: str,
                                                                  mmapped: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", THRESHOLD_PROBE, mode], capture_output=True,
                          text=True, timeout=60, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [{"hold": "True", "glibc": "None"}[mode], mmapped]


def test_an_operators_malloc_thresholds_are_kept() -> None:
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        assert hold_mmap_threshold({name: "1048576"}) is False
