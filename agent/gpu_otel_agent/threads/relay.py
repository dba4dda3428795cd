"""Device threads due at the same moment run one after another, not all at once.

Eight or sixteen device threads released together fight for the GIL: every NVML call through
ctypes drops it, another thread takes it, and the caller waits to get it back. Measured on
eight GPUs, a job cost about six context switches, and the hand-offs cost several times the
reads themselves. So the devices that get jobs at the same moment form a relay: the first
device's thread is woken at once, each device thread hands the next one its jobs when it is
done, only one device thread holds the GIL at a time, and the results reach the loop together
when the last device is done: one ``call_soon_threadsafe`` sets them all on the loop (the loop
wakes once, not once per device while the next device's thread runs, nor once per job).

Nothing waits for the loop: a device joins the running round as its first job is submitted,
and the round starts with the first device, as a lone job always did. (Handing jobs over at
the end of the loop iteration instead cost a loop pass per cycle, and under an XID storm, when
every pass is long, that starved sampling.)

Isolation stays: a round that takes longer than ``PASS_ON_AFTER_S`` (a device hung in its
leg, or slow legs: the GIL held by a busy thread during an XID storm, a loaded node) is
released: the results so far go out and every remaining leg goes at once, as before the
relay, from the loop's timer or from whichever device thread notices first. Each job's
deadline still runs from its submission.

What reads the devices' published readings as a whole (the metric export) can ask to run
right after a round (``Relay.after_round``): in the loop wake-up that set the round's results,
behind the devices' tasks that publish them, instead of on a timer of its own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Final

# Longer than a healthy node's reads on one tick (milliseconds on real GPUs), far shorter
# than the default call deadline (2 s): a hung device delays the others by this much at most.
PASS_ON_AFTER_S: Final = 0.05

# Puts a device's jobs into its thread's queue; the thread calls the round's ``finish`` after
# them (None: released by the timeout, no baton to pass).
Leg = Callable[["Round | None"], None]
Settle = Callable[[], None]  # sets a finished job's future (its result or its exception)


class Round:
    """The legs of devices that got jobs while the round ran. ``join`` runs on the loop;
    ``finish`` on whichever thread finished a leg (``next`` starts the round)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pass_on_after_s: float) -> None:
        self._legs: deque[Leg] = deque()
        self._lock = threading.Lock()
        self._loop = loop
        self._deadline = time.monotonic() + pass_on_after_s
        self._timer = loop.call_later(pass_on_after_s, self.release_all)
        self._unsettled: list[Settle] = []  # finished legs' results, held for the round's end
        self.over = False  # ended or released: a device with new jobs starts another round
        # Run on the loop once the round's results are set (None: they are; see ``after``).
        self._after: list[Callable[[], None]] | None = []

    def join(self, leg: Leg) -> bool:
        """Queue ``leg`` behind the running one; False once the round is over."""
        with self._lock:
            if self.over:
                return False
            self._legs.append(leg)
            return True

    def finish(self, results: list[Settle]) -> None:
        """A leg is done: its results are held until the round ends (then set together), and
        the next leg is handed over; after the last one, every device's results go to the
        loop together. One lock round for both (a device thread per leg, every tick)."""
        late = time.monotonic() > self._deadline
        leg: Leg | None = None
        with self._lock:
            over = self.over
            if not over:
                self._unsettled += results
                if not late:
                    leg = self._legs.popleft() if self._legs else None
                    if leg is None:
                        results, self._unsettled, self.over = self._unsettled, [], True
        if over:  # released meanwhile: the results go out now (nothing is left to hand on)
            _settle(results)
        elif late:
            self.release_all()
        elif leg is not None:
            leg(self)
        else:
            self._hand_to_loop(results)

    def after(self, callback: Callable[[], None]) -> None:
        """On the loop: run ``callback`` there after the round's results are set and the
        tasks they wake have run (at once, through ``call_soon``, if they are already)."""
        with self._lock:
            if self._after is not None:
                self._after.append(callback)
                return
        self._loop.call_soon(callback)

    def _take_after(self) -> list[Callable[[], None]]:
        with self._lock:
            after, self._after = self._after or [], None
        return after

    def next(self) -> None:
        """Start the round: hand the first leg over (``finish`` with no results yet)."""
        self.finish([])

    def _hand_to_loop(self, results: list[Settle]) -> None:
        # Every device's results are set on the loop, in one hand-off: set here, each would
        # reach its waiter with a call_soon_threadsafe of its own (threads.handoff).
        try:
            self._loop.call_soon_threadsafe(self._end, results)
        except RuntimeError:  # the loop is closed: nobody waits on the loop any more
            _settle(results)

    def _end(self, results: list[Settle]) -> None:
        """On the loop: the round is over, its results go to their waiters."""
        self._timer.cancel()
        _settle(results)
        # Set on this thread, the results' waiters have their tasks' steps queued already:
        # the callbacks run after them, so they see what those tasks publish.
        for callback in self._take_after():
            self._loop.call_soon(callback)

    def release_all(self) -> None:
        """Past the deadline (the loop's timer, or a device thread that noticed): the
        results so far go out and every remaining leg goes at once, each settling its own."""
        with self._lock:
            legs, self._legs = list(self._legs), deque()
            results, self._unsettled, self.over = self._unsettled, [], True
        _settle(results)
        for leg in legs:
            leg(None)
        # Perhaps off the loop: a result set from another thread reaches its waiter through
        # the loop's queue, and the waiter's task is queued only then; one more hop queues
        # each callback behind that task.
        for callback in self._take_after():
            self._loop.call_soon_threadsafe(self._loop.call_soon, callback)


def _settle(results: list[Settle]) -> None:
    for result in results:
        result()


class Relay:
    """The node's devices' rounds, one running at a time (``add`` on the loop)."""

    def __init__(self, pass_on_after_s: float = PASS_ON_AFTER_S) -> None:
        self._pass_on_after_s = pass_on_after_s
        self._round: Round | None = None

    def add(self, leg: Leg, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """A device has jobs: it joins the running round, or starts one with its leg.
        ``loop``: the running loop (the caller's, at hand; None: looked up)."""
        if self._round is not None and self._round.join(leg):
            return
        self._round = Round(asyncio.get_running_loop() if loop is None else loop,
                            self._pass_on_after_s)
        self._round.join(leg)
        self._round.next()

    def after_round(self, callback: Callable[[], None]) -> None:
        """On the loop: run ``callback`` there once the running round's results are set and
        the tasks they wake have published them; soon (``call_soon``) if no round runs.
        A round released at its pass-on deadline counts as ended: a hung device delays
        ``callback`` by ``PASS_ON_AFTER_S`` at most."""
        if self._round is None:
            asyncio.get_running_loop().call_soon(callback)
        else:
            self._round.after(callback)
