"""Instructions per metric export's hand-off from the event loop to the export thread and back.

``cycle_cost --stage send`` counts an export's send on the calling thread; what the pusher
adds around it each interval (taking the snapshot, handing the export to its thread, waiting
for it with a deadline, recording the outcome) is counted here: ``MetricPusher.export_once``
on the agent's loop policy (uvloop where installed) with an exporter that answers at once, in
a child under ``valgrind --tool=callgrind``, once with 0 exports and once with N after the
same warm-up; the difference divided by N. Thread wake-ups are the kernel's and not counted.

``python -m tests.bench.handoff_cost --exports 1000`` prints JSON; run it against two trees
(``PYTHONPATH=<tree>/agent``) to compare commits (issue 41's figures were taken so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys

WARM = 20


class _Exporter:
    """Answers every export at once: only the hand-off is counted."""

    def export(self, snapshot: object, timeout_s: float) -> bool:
        return True

    def shutdown(self, timeout_s: float) -> None:
        return None


async def _exports(count: int) -> None:
    from gpu_otel_agent.config.holder import ConfigHolder
    from gpu_otel_agent.config.load import load
    from gpu_otel_agent.export.metrics.pusher import MetricPusher
    from gpu_otel_agent.model.snapshot import (
        DeviceIdentity,
        DeviceSnapshot,
        HealthState,
        SnapshotStore,
    )

    store = SnapshotStore()
    store.put(DeviceSnapshot(DeviceIdentity("GPU-0", 0, "nvidia", "GPU", "bus"),
                             HealthState.OK, 1))
    pusher = MetricPusher(_Exporter(), store, ConfigHolder(load(None, environ={})), 1)
    for _ in range(WARM + count):
        await pusher.export_once(timeout=30.0)
    if pusher.stats.exports != WARM + count or pusher.stats.failures:
        raise RuntimeError(f"exports not all recorded: {pusher.stats}")
    await pusher.close(5.0)


def _child(count: int) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(_exports(count))
    else:
        uvloop.run(_exports(count))


def _instructions(count: int) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "-m", "tests.bench.handoff_cost", "--child", str(count)],
        capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"),
        check=False, timeout=3000)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise RuntimeError(f"callgrind run failed:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--exports", type=int, default=1000)
    parser.add_argument("--child", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child)
        return 0
    base, total = _instructions(0), _instructions(args.exports)
    json.dump({"exports": args.exports,
               "instructions_per_export": (total - base) / args.exports}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
