"""The agent for minutes under NVML chaos on the 16-GPU node: errors, completeness, memory.

The real agent samples and exports every ``interval`` to a local OTLP/gRPC receiver while the
simulated node answers a fraction ``rate`` of NVML calls with an error drawn from each
function's documented ``@return`` codes in ``nvml.h`` (seeded, so a run is reproducible).

What is measured, and from where:

- errors injected: the node's ``stats`` (``chaos.injected`` per function and code, plus
  ``field_injected`` per field of ``nvmlDeviceGetFieldValues``), over the chaos window;
- errors counted: the agent's ``gpu_agent.library.errors`` at the receiver (all of them must
  arrive: the case waits until the exported count reaches the injected one), less what it
  had counted before chaos (capability answers at probe);
- samples exported: distinct ``hw.power`` sample times per GPU at the receiver over the
  window, against the cycles the window holds (a failed read leaves a value absent, never 0);
- missed cycles and failed reads: the agent's own counters, over the window;
- NVML calls per sampling cycle, calm (before) and under chaos: a retry storm would show;
- RSS: the agent's resident memory sampled through the window (growth = a leak per error).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.bench.procstat import rss_mib
from tests.bench.results import ChaosResult
from tests.bench.running import agent_on_node
from tests.receivers.store import Store

SAMPLED = "hw.power"  # a fast-group field every GPU serves every cycle


@dataclass(frozen=True)
class ChaosCase:
    name: str
    scenario: Path
    minutes: float
    rate: float = 0.02
    seed: int = 7
    interval: float = 1.0  # sampling = export interval (s)
    calm_s: float = 10.0  # before chaos: the calls-per-cycle baseline
    rss_every_s: float = 10.0




def _sum(store: Store, metric: str, *keys: str) -> float:
    return sum(store.latest_values(metric, *keys).values())


def _injected(chaos: Mapping[str, object]) -> int:
    return int(str(chaos["injected_total"])) + int(str(chaos["field_injected_total"]))


def _calls(node: SimulatedNode) -> int:
    calls = node.stats()["calls"]
    assert isinstance(calls, Mapping)
    return sum(int(n) for n in calls.values())


def _chaos(node: SimulatedNode) -> Mapping[str, object]:
    chaos = node.stats()["chaos"]
    assert isinstance(chaos, Mapping)
    return chaos


def run_chaos_case(case: ChaosCase, workdir: Path) -> ChaosResult:
    workdir.mkdir(parents=True, exist_ok=True)
    flags = ["--interval", f"{case.interval:g}", "--export-interval", f"{case.interval:g}"]
    errors = ("gpu_agent.call", "error.type")
    with agent_on_node(case.scenario, workdir, flags) as run:
        node, store, agent, gpus = run.node, run.store, run.agent, run.gpus
        pid = agent.process.pid
        calls0, cycles0 = _calls(node), _sum(store, "gpu_agent.cycles.completed", "hw.id")
        time.sleep(case.calm_s)
        calls1, cycles1 = _calls(node), _sum(store, "gpu_agent.cycles.completed", "hw.id")
        counted_before = _sum(store, "gpu_agent.library.errors", *errors)
        missed_before = _sum(store, "gpu_agent.cycles.missed", "hw.id")
        read_errors_before = _sum(store, "gpu_agent.read.errors", "hw.id")
        injected_before = _injected(_chaos(node))
        node.command({"op": "chaos", "rate": case.rate, "seed": case.seed})
        start_wall, start = time.time(), time.monotonic()
        rss: list[tuple[float, float]] = [(0.0, round(rss_mib(pid), 1))]
        end = start + case.minutes * 60
        while (now := time.monotonic()) < end:
            time.sleep(min(case.rss_every_s, end - now))
            if agent.process.poll() is not None:
                raise RuntimeError(f"the agent exited under chaos:\n{agent.log()[-4000:]}")
            rss.append((round(time.monotonic() - start, 1), round(rss_mib(pid), 1)))
        calls2, cycles2 = _calls(node), _sum(store, "gpu_agent.cycles.completed", "hw.id")
        node.command({"op": "chaos", "off": True})
        end_wall = time.time()
        chaos = _chaos(node)
        injected = _injected(chaos) - injected_before
        # Every error the node injected must reach the receiver in the agent's counter.
        store.wait_for(lambda s: _sum(s, "gpu_agent.library.errors", *errors)
                       - counted_before >= injected, timeout=60,
                       what=f"{injected} injected errors counted and exported")
        counted = _sum(store, "gpu_agent.library.errors", *errors) - counted_before
        missed = _sum(store, "gpu_agent.cycles.missed", "hw.id") - missed_before
        read_errors = _sum(store, "gpu_agent.read.errors", "hw.id") - read_errors_before
        alive = agent.process.poll() is None
        agent.terminate()
    window = end_wall - start_wall
    sampled = {
        p.time_unix_nano for p in store.points(SAMPLED)
        if start_wall <= p.time_unix_nano / 1e9 <= end_wall
    }
    per_gpu = {}
    for p in store.points(SAMPLED):
        if start_wall <= p.time_unix_nano / 1e9 <= end_wall:
            per_gpu.setdefault(str(p.attributes["hw.id"]), set()).add(p.time_unix_nano)
    expected = gpus * int(window / case.interval)
    by_code: dict[str, int] = {}
    functions = chaos["injected"]
    assert isinstance(functions, Mapping)
    for codes in functions.values():
        assert isinstance(codes, Mapping)
        for code, n in codes.items():
            by_code[str(code)] = by_code.get(str(code), 0) + int(n)
    return ChaosResult(
        case=case.name, scenario=case.scenario.name, gpus=gpus, minutes=case.minutes,
        rate=case.rate, seed=case.seed, interval_s=case.interval,
        errors_injected=injected, errors_counted=int(counted),
        injected_by_code=dict(sorted(by_code.items())),
        field_errors_injected=int(str(chaos["field_injected_total"])),
        samples_exported=sum(len(t) for t in per_gpu.values()),
        samples_expected=expected,
        gpus_exporting=len(per_gpu),
        distinct_sample_times=len(sampled),
        missed_cycles=int(missed), read_errors=int(read_errors),
        calls_per_cycle_calm=round((calls1 - calls0) / max(cycles1 - cycles0, 1), 2),
        calls_per_cycle_chaos=round((calls2 - calls1) / max(cycles2 - cycles1, 1), 2),
        rss_mib=tuple(rss),
        rss_growth_mib=round(rss[-1][1] - rss[0][1], 1),
        agent_alive=alive,
    )
