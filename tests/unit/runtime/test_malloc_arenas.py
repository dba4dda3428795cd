"""The agent's malloc arena limit: taken by glibc in a fresh process, an operator's own
``MALLOC_ARENA_MAX`` left alone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from gpu_otel_agent.runtime.malloc_arenas import limit_malloc_arenas

PROBE = """
import threading
from gpu_otel_agent.runtime.malloc_arenas import limit_malloc_arenas
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
