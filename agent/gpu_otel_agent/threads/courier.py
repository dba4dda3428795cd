"""The thread that carries a relay's rounds: one thread wakes per round, not one per device.

A round handed from device thread to device thread woke each of them in turn: at eight GPUs
eight wake-ups a tick (a futex wake, a context switch, the GIL taken back, a cold cache), about
41 µs a device per cycle on top of the reads. The courier runs the legs back to back on one
thread instead (``Round.drive``), each device's jobs through that device's worker, so it is
woken once per round and stays warm between legs. It is ``gpu-courier-N`` (in the kernel
too); while it runs a device's leg its Python name is that device's thread's (``gpu-3``), and
the agent's CPU figures count it with the device threads (its ``family``).

A courier is never waited for: when its round is released while it is inside a leg (the
device hung, or the leg is slow) the courier is *stranded*. If it is still inside that leg when
the next round starts, the relay makes a new courier for it, and the stranded one ends when
its call returns (after setting that leg's results); out of it before (a slow leg, not a hung
one), it carries on with the next rounds, so a loaded node does not make a thread per round.
So a device hung forever costs one thread, the courier stuck in its call, never more: the
device stays ``busy`` (its job pending), no later leg of it goes to a courier while a batch of
it is running anywhere (``DeviceWorker``), and its own thread waits behind the stuck call.

A courier whose own loop raises (a bug in the round's bookkeeping, not a job: a job's error goes
to its waiter) is restarted by ``SupervisedThread`` and picks up its round where it failed:
first the leg it was inside, finished as a device thread finishes a batch it failed in (the job
it was running ends with an error, the jobs after it run), then the round's other legs.
"""

from __future__ import annotations

import queue
import threading
from typing import Protocol

from gpu_otel_agent.threads.supervised import SupervisedThread

# The device threads' family in the agent's CPU figures (``threads.costs``): what the courier
# spends is the devices' hand-off and sampling, as it was on their own threads.
FAMILY = "gpu"


class Drive(Protocol):
    """A round as its courier sees it (``threads.relay.Round``)."""

    def drive(self) -> bool:
        """Runs the round's legs; False when the round was released while the courier was
        inside one."""
        ...


class Courier:
    """One thread running the rounds it is handed, one after another."""

    def __init__(self, name: str) -> None:
        self._rounds: queue.SimpleQueue[Drive | None] = queue.SimpleQueue()
        self._round: Drive | None = None  # the round it is in (picked up again after a restart)
        self._lock = threading.Lock()
        self._stranded = False  # its round was released while it was inside a leg
        self._replaced = False  # stranded when the next round started: it ends after the leg
        self._thread = SupervisedThread(self._loop, name, first_backoff_s=0.01)
        self._thread.family = FAMILY
        self._thread.start()

    def take(self, round_: Drive) -> None:
        """Run ``round_`` after the ones handed over before it (wakes the thread if idle)."""
        self._rounds.put(round_)

    def stop(self) -> None:
        """End the thread once the rounds handed over are run."""
        self._rounds.put(None)

    def strand(self) -> None:
        """Its round was released while it was inside a leg (the round's ``release_all``)."""
        with self._lock:
            self._stranded = True

    def replaced(self) -> bool:
        """Before a round is handed over (on the loop): True if the courier is still stuck in
        the leg of a released round, and is replaced (it ends when out of that leg)."""
        with self._lock:
            self._replaced = self._stranded
            return self._replaced

    def _loop(self) -> None:
        while True:
            if self._round is None:
                self._round = self._rounds.get()
                if self._round is None:
                    return
            if not self._round.drive():  # released while it was inside a leg, out of it now
                with self._lock:
                    self._stranded = False
                    if self._replaced:
                        return
            self._round = None
