"""Host process churn: ``python -m tests.bench.churn RATE`` execs ``true`` RATE times a second.

Short non-GPU processes, as data-loader workers and shell pipelines make them: each one is a
fork, an exec and an exit the kernel's process-event sources see. ``posix_spawn`` (vfork and
exec) keeps the generator's own cost low; the pace is kept against the clock, so a slow spawn
is caught up rather than lowering the rate. On SIGTERM it prints how many it started and over
how many seconds, as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time


def main() -> int:
    rate = float(sys.argv[1])
    true = shutil.which("true") or "/bin/true"
    stop = False

    def finish(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, finish)
    started = time.monotonic()
    spawned = 0
    while not stop:
        due = started + spawned / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        pid = os.posix_spawn(true, [true], {})
        os.waitpid(pid, 0)
        spawned += 1
    print(json.dumps({"spawned": spawned, "seconds": time.monotonic() - started}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
