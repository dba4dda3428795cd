"""Threads that carry their name down to the kernel, so ``top -H``, ``ps -L`` and
``/proc/PID/task/*/comm`` tell the agent's threads apart (Python 3.11 leaves every one of them
"python"; an operator chasing a busy thread, and the benchmark's per-thread figures, need the
name)."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Final

_PR_SET_NAME: Final = 15  # linux/prctl.h
_COMM_BYTES: Final = 15  # TASK_COMM_LEN less the terminating NUL
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` in the kernel (cut to 15 bytes; best effort: a libc
    without prctl only loses the name)."""
    encoded = name.encode("ascii", "replace")[:_COMM_BYTES]
    try:
        _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(encoded), 0, 0, 0)
    except AttributeError:
        return


class NamedThread(threading.Thread):
    """A ``threading.Thread`` whose kernel name is its Python name."""

    # Which threads the agent's CPU figures count it with (``threads.costs.threads``); None:
    # those of its name less a trailing number (``gpu-3`` -> ``gpu``).
    family: str | None = None

    def run(self) -> None:
        name_os_thread(self.name)
        super().run()


def name_pool_thread() -> None:
    """``ThreadPoolExecutor(initializer=name_pool_thread)``: a pool thread takes its Python name
    (``otlp-export_0``) in the kernel too."""
    name_os_thread(threading.current_thread().name)
