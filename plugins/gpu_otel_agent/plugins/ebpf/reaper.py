"""Detaching uprobes off the paths that must not wait.

The kernel waits for an SRCU grace period as it removes each uprobe: about 0.1 s a link on the
2-core VM measured here (44 links, the stand-in runtime and driver: some 5 s), milliseconds on
a bare-metal node. A daemon thread destroys the links, so neither the plugin's cycle nor the
agent's shutdown waits for it; links still held when the agent exits are released by the
kernel as the process ends.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpu_otel_agent.plugins.ebpf.libbpf import Link
from gpu_otel_agent.threads.named import NamedThread


@dataclass(frozen=True)
class _Batch:
    links: Sequence[Link]
    done: Callable[[], None]


class LinkReaper:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Batch] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = 0

    @property
    def pending(self) -> int:
        """Batches (one a library) handed over and not yet wholly detached."""
        return self._pending

    def release(self, links: Sequence[Link], done: Callable[[], None]) -> None:
        """Detach ``links`` in the background, then call ``done`` (from the reaper thread)."""
        with self._lock:
            self._pending += 1
            self._queue.put(_Batch(links, done))
            if self._thread is None:
                self._thread = NamedThread(target=self._run, name="ebpf-detach",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            for link in batch.links:
                link.destroy()
            with self._lock:
                self._pending -= 1
            batch.done()
