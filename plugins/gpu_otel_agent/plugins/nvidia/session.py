"""The process's NVML initialisation, renewed after a driver reload.

After a driver reload (or while the library and kernel module disagree) NVML answers
``UNINITIALIZED`` / ``DRIVER_NOT_LOADED`` / ``LIB_RM_VERSION_MISMATCH`` and handles taken
before may be invalid. The first device to notice calls :meth:`NvmlSession.reinit`; the
generation number tells every other device (and event thread) to find its handle again by
UUID, so its series keep their identity. Attempts are spaced by :data:`RETRY_S`, so a driver
that stays away is not asked once per GPU per cycle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pynvml

log = logging.getLogger(__name__)
RETRY_S = 1.0


class NvmlSession:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.generation = 0
        self._inits = 0
        self._failed: tuple[float, pynvml.NVMLError] | None = None

    def open(self) -> None:
        pynvml.nvmlInit()
        with self._lock:
            self._inits += 1

    def reinit(self, seen: int) -> int:
        """Initialise NVML again unless another thread did since generation ``seen``; returns
        the current generation. Raises the pynvml error while the driver stays away."""
        with self._lock:
            if self.generation != seen:
                return self.generation
            if self._failed is not None and self._clock() - self._failed[0] < RETRY_S:
                raise self._failed[1]
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as error:
                self._failed = (self._clock(), error)
                raise
            self._failed = None
            self._inits += 1
            self.generation += 1
            log.warning("NVML re-initialised (driver reload?): generation %d", self.generation)
            return self.generation

    def close(self) -> None:
        """Undo every nvmlInit (NVML counts them)."""
        with self._lock:
            inits, self._inits = self._inits, 0
        for _ in range(inits):
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError as error:
                log.debug("nvmlShutdown: %s", error)
                return
