"""Device threads due at the same moment run one after another, not all at once.

Eight or sixteen device threads released together fight for the GIL: every NVML call through
ctypes drops it, another thread takes it, and the caller waits to get it back. Measured on
eight GPUs, a job cost about six context switches, and the hand-offs cost several times the
reads themselves. So the jobs one loop iteration gathers for several devices go as a relay:
the loop hands the first device its jobs, each device thread hands the next one its jobs
when it is done, and only one device thread holds the GIL at a time.

Isolation stays: a device that hangs in its leg holds the baton for at most
``PASS_ON_AFTER_S``; then the loop hands every remaining leg over at once, as it did before
the relay. Each job's deadline still runs from its submission.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Final

# Longer than a healthy device's reads on one tick (milliseconds on real GPUs), far shorter
# than the default call deadline (2 s): a hung device delays the others by this much at most.
PASS_ON_AFTER_S: Final = 0.05

# Puts a device's jobs into its thread's queue; the thread calls the round's ``next`` after
# them (None: released by the timeout, no baton to pass).
Leg = Callable[["Round | None"], None]
Settle = Callable[[], None]  # sets a finished job's future (its result or its exception)


class Round:
    """The legs of one loop iteration; ``next`` runs on whichever thread finished a leg."""

    def __init__(self, legs: list[Leg], loop: asyncio.AbstractEventLoop) -> None:
        self._legs = deque(legs)
        self._lock = threading.Lock()
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._unsettled: list[Settle] = []  # finished legs' results, held for the round's end
        self._released = False  # by the timeout: results go out as they come

    def start(self, pass_on_after_s: float) -> None:
        """On the loop: hand over the first leg; the rest follow, or go at the timeout."""
        if len(self._legs) > 1:
            self._timer = self._loop.call_later(pass_on_after_s, self.release_all)
        self.next()

    def settle(self, results: list[Settle]) -> None:
        """A leg's results (setting its jobs' futures): held until the round ends, so the
        loop wakes once for all the devices' results instead of once per device, while the
        next device's thread runs."""
        with self._lock:
            if not self._released:
                self._unsettled += results
                return
        for result in results:
            result()

    def next(self) -> None:
        """Hand the next leg over (its thread calls ``next`` again when done); after the
        last one, every device's results go to the loop together."""
        with self._lock:
            leg = self._legs.popleft() if self._legs else None
            results: list[Settle] = []
            if leg is None:
                results, self._unsettled, self._released = self._unsettled, [], True
        if leg is not None:
            leg(self)
            return
        for result in results:
            result()
        if self._timer is not None and not self._loop.is_closed():
            # The relay finished before the timeout: nothing left for the timer to release.
            # (Sent right after the results: the loop wakes once for all of it.)
            self._loop.call_soon_threadsafe(self._timer.cancel)

    def release_all(self) -> None:
        """On the loop, at the timeout: a leg is stuck; the results so far go out and every
        remaining leg goes at once, each settling its own."""
        with self._lock:
            legs, self._legs = list(self._legs), deque()
            results, self._unsettled, self._released = self._unsettled, [], True
        for result in results:
            result()
        for leg in legs:
            leg(None)


class Relay:
    """Gathers the device legs of one loop iteration into a :class:`Round` (on the loop)."""

    def __init__(self, pass_on_after_s: float = PASS_ON_AFTER_S) -> None:
        self._pass_on_after_s = pass_on_after_s
        self._gathering: list[Leg] | None = None

    def add(self, leg: Leg) -> None:
        if self._gathering is None:
            self._gathering = []
            asyncio.get_running_loop().call_soon(self._start)
        self._gathering.append(leg)

    def _start(self) -> None:
        legs, self._gathering = self._gathering or [], None
        Round(legs, asyncio.get_running_loop()).start(self._pass_on_after_s)
