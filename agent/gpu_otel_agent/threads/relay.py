"""Device jobs due at the same moment run one after another, on one thread, not all at once.

Eight or sixteen device threads released together fight for the GIL: every NVML call through
ctypes drops it, another thread takes it, and the caller waits to get it back. Measured on
eight GPUs, a job cost about six context switches, and the hand-offs cost several times the
reads themselves. So the devices that get jobs at the same moment form a round: its legs (a
device's jobs each) run in turn, only one holds the GIL at a time, and the results reach the
loop together when the last leg is done: one ``call_soon_threadsafe`` sets them all on the loop
(the loop wakes once, not once per device, nor once per job).

The legs run back to back on the relay's courier (``threads.courier``), each device's jobs
through that device's worker (its ``busy`` count, its deadline, its ``sampling`` stage): one
thread wakes per round. (Handing the baton from device thread to device thread woke every
device's thread in turn, about 41 µs a device per cycle.) A device whose own thread has work
of its device (a batch handed there earlier, a released leg still running) gets its leg run
there, behind that work, and the leg sets its own results: a device's jobs run in the order
they were submitted, never on two threads at once.

Nothing waits for the loop: a device joins the running round as its first job is submitted,
and the round starts with the first device, as a lone job always did. (Handing jobs over at
the end of the loop iteration instead cost a loop pass per cycle, and under an XID storm, when
every pass is long, that starved sampling.)

Isolation stays, a hung GPU stalls only itself: a round that takes longer than
``PASS_ON_AFTER_S`` (a device hung in its leg, or slow legs: the GIL held by a busy thread
during an XID storm, a loaded node) is released: the results so far go out and every
remaining leg goes at once to its own device's thread, from the loop's timer or from the
courier if it notices first. A courier still inside a released round's leg (a hung call) when
the next round starts is replaced: that round gets a new courier (``threads.courier``). Each
job's deadline still runs from its submission.

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
from typing import Final, Protocol

from gpu_otel_agent.threads.courier import FAMILY, Courier

# Longer than a healthy node's reads on one tick (milliseconds on real GPUs), far shorter
# than the default call deadline (2 s): a hung device delays the others by this much at most.
PASS_ON_AFTER_S: Final = 0.05

Settle = Callable[[], None]  # sets a finished job's future (its result or its exception)


class Leg(Protocol):
    """A device's jobs in a round (``threads.device_worker``)."""

    name: str  # the device's thread's: the courier's name while it runs the leg

    def run_here(self) -> list[Settle] | None:
        """On the courier: runs the jobs on the calling thread, returns what sets their
        futures. None when the device's own thread has work of the device: the leg went there,
        behind it, and sets its futures itself."""
        ...

    def resume_here(self) -> list[Settle]:
        """``run_here`` again after the courier's loop failed inside it (then restarted):
        the job it was running ends with an error, the jobs after it run."""
        ...

    def send(self) -> None:
        """To the device's own thread (the round was released): it sets its futures."""
        ...


class Round:
    """The legs of devices that got jobs while the round ran. ``join`` runs on the loop,
    ``drive`` on the courier, ``release_all`` on either."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pass_on_after_s: float,
                 courier: Courier) -> None:
        self._legs: deque[Leg] = deque()
        self._lock = threading.Lock()
        self._loop = loop
        self._courier = courier
        self._deadline = time.monotonic() + pass_on_after_s
        self._timer = loop.call_later(pass_on_after_s, self.release_all)
        self._unsettled: list[Settle] = []  # finished legs' results, held for the round's end
        self._in_leg: Leg | None = None  # the leg the courier is running
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

    def drive(self) -> bool:
        """On the courier: the legs one after another, their results held until the last is
        done, then every device's results go to the loop together. A courier restarted after
        its loop failed finishes the leg it was in first. False: the round was released while
        the courier was inside a leg (its results are set now).

        Each leg runs under its device's thread name (``threading.Thread.name``, not the
        kernel's): whatever names the thread of a device's job names the device, as on its
        own thread. Set per leg, given back once per round (a property call each)."""
        thread = threading.current_thread()
        own = thread.name
        try:
            return self._drive(thread)
        finally:
            thread.name = own

    def _drive(self, thread: threading.Thread) -> bool:
        # One lock round per leg: the results of one and the next one's start.
        leg = self._in_leg
        if leg is not None:
            thread.name = leg.name
        results = leg.resume_here() if leg is not None else None
        while True:
            late = time.monotonic() > self._deadline
            with self._lock:
                released = self.over  # by the loop's timer, during a leg or before the first
                stranded = self._in_leg is not None
                self._in_leg = None
                if not released:
                    if results:
                        self._unsettled += results
                    leg = None if late or not self._legs else self._legs.popleft()
                    self._in_leg = leg
                    if leg is None and not late:
                        results, self._unsettled, self.over = self._unsettled, [], True
            if released:  # nothing is left to run, the leg's results go out now
                _settle(results or [])
                return not stranded
            if late:
                self.release_all()
                return True
            if leg is None:
                self._hand_to_loop(results or [])
                return True
            thread.name = leg.name
            results = leg.run_here()

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
        """Past the deadline (the loop's timer, or the courier between legs): the results so
        far go out and every remaining leg goes at once to its device's thread, each setting
        its own. A courier inside a leg now is stranded: the round no longer waits for it,
        and the next round will not either if it is still there."""
        with self._lock:
            legs, self._legs = list(self._legs), deque()
            results, self._unsettled, self.over = self._unsettled, [], True
            if self._in_leg is not None:
                self._courier.strand()
        _settle(results)
        for leg in legs:
            leg.send()
        # Perhaps off the loop: a result set from another thread reaches its waiter through
        # the loop's queue, and the waiter's task is queued only then; one more hop queues
        # each callback behind that task.
        for callback in self._take_after():
            self._loop.call_soon_threadsafe(self._loop.call_soon, callback)


def _settle(results: list[Settle]) -> None:
    for result in results:
        result()


class Relay:
    """The node's devices' rounds, one running at a time (``add`` on the loop), on one
    courier thread while the node is healthy. ``enlist``/``leave``: a device worker's start
    and stop; the courier ends when the last one leaves."""

    def __init__(self, pass_on_after_s: float = PASS_ON_AFTER_S) -> None:
        self._pass_on_after_s = pass_on_after_s
        self._round: Round | None = None
        self._lock = threading.Lock()  # the courier and the enlisted count
        self._courier: Courier | None = None  # made at the first round, again if replaced
        self._couriers = 0  # how many were made: each one's name has its number
        self._enlisted = 0

    def add(self, leg: Leg, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """A device has jobs: it joins the running round, or starts one with its leg.
        ``loop``: the running loop (the caller's, at hand; None: looked up)."""
        if self._round is not None and self._round.join(leg):
            return
        with self._lock:
            courier = self._courier
            if courier is None or courier.replaced():
                self._couriers += 1
                courier = self._courier = Courier(f"{FAMILY}-courier-{self._couriers}")
        self._round = Round(asyncio.get_running_loop() if loop is None else loop,
                            self._pass_on_after_s, courier)
        self._round.join(leg)
        courier.take(self._round)

    def enlist(self) -> None:
        with self._lock:
            self._enlisted += 1

    def leave(self) -> None:
        """A device worker stopped; after the last one the courier ends (once its rounds
        are run: a stranded one once out of its leg), and a later round makes a new one."""
        with self._lock:
            self._enlisted -= 1
            courier = self._courier if self._enlisted <= 0 else None
            if courier is not None:
                self._courier = None
        if courier is not None:
            courier.stop()

    def after_round(self, callback: Callable[[], None]) -> None:
        """On the loop: run ``callback`` there once the running round's results are set and
        the tasks they wake have published them; soon (``call_soon``) if no round runs.
        A round released at its pass-on deadline counts as ended: a hung device delays
        ``callback`` by ``PASS_ON_AFTER_S`` at most."""
        if self._round is None:
            asyncio.get_running_loop().call_soon(callback)
        else:
            self._round.after(callback)
