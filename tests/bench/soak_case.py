"""Memory over minutes: the agent sampling every 0.25 s on the 8-GPU node while real
short-lived processes come and go as GPU processes (about one a second).

Each process is a real ``sleep`` (so attribution reads its ``/proc`` entry like any GPU
process's), registered on a GPU of the simulated node while it lives and removed once it has
exited, the way NVML stops listing a process that ended. The agent's resident memory (VmRSS) is
sampled through the run; a structure that keeps something per process that came and went
shows as a steady climb. The figure the issue set: the end within 2 MiB of the value after the
first quarter (start-up and warm-up are over by then).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.bench.procstat import rss_mib
from tests.bench.results import SoakResult
from tests.bench.running import agent_on_node


@dataclass(frozen=True)
class SoakCase:
    name: str
    scenario: Path
    minutes: float
    interval: float = 0.25  # sampling = export interval (s)
    per_second: float = 1.0  # short-lived GPU processes started per second
    lifetime_s: float = 2.0  # each one's life: several sampling cycles
    rss_every_s: float = 10.0


def run_soak_case(case: SoakCase, workdir: Path) -> SoakResult:
    workdir.mkdir(parents=True, exist_ok=True)
    flags = ["--interval", f"{case.interval:g}", "--export-interval", f"{case.interval:g}"]
    live: list[subprocess.Popen[bytes]] = []
    started = 0
    with agent_on_node(case.scenario, workdir, flags) as run:
        pid = run.agent.process.pid
        try:
            start = time.monotonic()
            end = start + case.minutes * 60
            rss: list[tuple[float, float]] = [(0.0, round(rss_mib(pid), 1))]
            next_rss = start + case.rss_every_s
            while (now := time.monotonic()) < end:
                if started < (now - start) * case.per_second:
                    process = subprocess.Popen(["sleep", f"{case.lifetime_s:g}"])
                    run.node.command({"op": "proc_add", "device": started % run.gpus,
                                      "pid": process.pid,
                                      "used_memory_mib": 100 + started % 400})
                    live.append(process)
                    started += 1
                for gone in [p for p in live if p.poll() is not None]:
                    run.node.command({"op": "proc_rm", "pid": gone.pid})
                    live.remove(gone)
                if now >= next_rss:
                    if run.agent.process.poll() is not None:
                        raise RuntimeError(f"the agent exited:\n{run.agent.log()[-4000:]}")
                    rss.append((round(now - start, 1), round(rss_mib(pid), 1)))
                    next_rss += case.rss_every_s
                    run.store.clear()  # the receiver's own memory is not what is measured
                time.sleep(0.05)
            rss.append((round(time.monotonic() - start, 1), round(rss_mib(pid), 1)))
            alive = run.agent.process.poll() is None
            run.agent.terminate()
        finally:
            for process in live:
                process.kill()
                process.wait()
    quarter = next(m for t, m in rss if t >= rss[-1][0] / 4)
    return SoakResult(
        case=case.name, scenario=case.scenario.name, gpus=run.gpus, minutes=case.minutes,
        interval_s=case.interval, processes=started, lifetime_s=case.lifetime_s,
        rss_mib=tuple(rss), rss_after_quarter_mib=quarter,
        growth_after_quarter_mib=round(rss[-1][1] - quarter, 1),
        agent_alive=alive,
    )
