"""Which cases run, and for how long: the full run (about 14 minutes, the eBPF cases 2.5 of
them, host churn 2.5) and the smoke run.

Windows are whole numbers of fast cycles, and multiples of 30 s in the full run so the slow
(30 s) and gpm (10 s) groups fall into them a whole number of times. The smoke run keeps one
case of each kind with short windows, and samples the "10 s" cases every 2 s; its figures only
prove the suite works (each report section is produced and read back by
tests/unit/bench/test_smoke.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from tests.bench.agent_case import DEFAULT_FAST_INTERVAL_S, AgentCase
from tests.bench.attribution import AttributionCase
from tests.bench.chaos_case import ChaosCase
from tests.bench.churn_case import ChurnCase
from tests.bench.ebpf_case import EbpfCallCostCase, EbpfLoadCase
from tests.bench.encoding import EncodeCase
from tests.bench.events_case import EventCase
from tests.bench.fault_case import FaultCase
from tests.bench.hostile_case import HostileCase
from tests.bench.peers import PeerCase
from tests.bench.prometheus_flood import PrometheusFloodCase
from tests.bench.soak_case import SoakCase
from tests.bench.storm_case import StormCase
from tests.integration.harness import SCENARIOS

NODE_8 = SCENARIOS / "bench-8gpu-64proc.yaml"
NODE_16 = SCENARIOS / "bench-16gpu-256proc.yaml"
NODE_8_AMD = SCENARIOS / "bench-8mi300x-64proc.yaml"
NODE_8_MIG = SCENARIOS / "bench-8gpu-mig7-64proc.yaml"
# Issue 41's "8 x 2,048": 8 GPUs and 2,048 GPU processes in all (256 per GPU), as "16 x 256"
# is 16 GPUs and 256 processes in all (bench-16gpu-256proc.yaml).
NODE_8_2048 = SCENARIOS / "bench-8gpu-2048proc.yaml"

TARGETS: dict[str, float] = {
    "cpu_percent_one_core_8gpu_1s": 1.0,
    "cpu_percent_one_core_16gpu_1s": 2.0,
    "cpu_percent_one_core_8gpu_defaults": 0.25,
    "cpu_percent_one_core_8gpu_2048proc_1s": 2.5,  # issue 41
    "peak_rss_mib": 60.0,
    "peak_rss_mib_8gpu_2048proc_1s": 60.0,  # issue 41
    "fast_calls_per_gpu_per_cycle": 3.0,
    "first_export_s": 2.0,
    "missed_cycles": 0.0,
    "churn_cpu_percent_added_500": 0.5,
}


@dataclass(frozen=True)
class Plan:
    smoke: bool
    agent: tuple[AgentCase, ...]
    nvitop_exporter: tuple[PeerCase, ...]
    gpustat: tuple[PeerCase, ...]
    encode: tuple[EncodeCase, ...]
    attribution: tuple[AttributionCase, ...] = ()
    events: tuple[EventCase, ...] = ()
    ebpf_call_cost: tuple[EbpfCallCostCase, ...] = ()
    ebpf_load: tuple[EbpfLoadCase, ...] = ()
    prometheus: tuple[PrometheusFloodCase, ...] = ()
    storm: tuple[StormCase, ...] = ()
    chaos: tuple[ChaosCase, ...] = ()
    churn: tuple[ChurnCase, ...] = ()
    soak: tuple[SoakCase, ...] = ()
    faults: tuple[FaultCase, ...] = ()
    hostile: tuple[HostileCase, ...] = ()

    def case_names(self) -> tuple[str, ...]:
        return (*(c.name for c in self.agent), *(c.name for c in self.nvitop_exporter),
                *(c.name for c in self.gpustat), *(c.name for c in self.encode),
                *(c.name for c in self.attribution), *(c.name for c in self.events),
                *(c.name for c in self.storm), *(c.name for c in self.ebpf_call_cost),
                *(c.name for c in self.ebpf_load), *(c.name for c in self.prometheus),
                *(c.name for c in self.chaos), *(c.name for c in self.churn),
                *(c.name for c in self.soak), *(c.name for c in self.faults),
                *(c.name for c in self.hostile))

    def only(self, names: set[str]) -> Plan:
        """The cases named, and nothing else (peers still need the agent case they are
        compared with: name it too)."""
        return Plan(self.smoke, _kept(self.agent, names), _kept(self.nvitop_exporter, names),
                    _kept(self.gpustat, names), _kept(self.encode, names),
                    _kept(self.attribution, names), _kept(self.events, names),
                    _kept(self.ebpf_call_cost, names), _kept(self.ebpf_load, names),
                    _kept(self.prometheus, names), _kept(self.storm, names),
                    _kept(self.chaos, names), _kept(self.churn, names),
                    _kept(self.soak, names), _kept(self.faults, names),
                    _kept(self.hostile, names))


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_Case = TypeVar("_Case", bound=_Named)


def _kept(cases: tuple[_Case, ...], names: set[str]) -> tuple[_Case, ...]:
    return tuple(c for c in cases if c.name in names)


def _agent(gpus: int, scenario: Path, interval: float, cycles: int, fast: int) -> AgentCase:
    return AgentCase(f"agent-{gpus}gpu-{interval:g}s", scenario, interval, cycles, fast)


def _nvitop(interval: float, cycles: int, agent: AgentCase) -> PeerCase:
    return PeerCase(f"nvitop-exporter-8gpu-{interval:g}s", NODE_8, interval, cycles, agent.name)


CHAOS_MINUTES = 10.0
SOAK_MINUTES = 10.0
FAULT_MINUTES = 10.0


def build(smoke: bool, chaos_minutes: float | None = None) -> Plan:
    """``chaos_minutes`` shortens (or lengthens) the nvml-chaos case (default 10, smoke 0.2)."""
    slow = 2.0 if smoke else 10.0
    fast_8 = _agent(8, NODE_8, 1.0, 2 if smoke else 60, 1 if smoke else 10)
    slow_8 = _agent(8, NODE_8, slow, 1 if smoke else 12, 1 if smoke else 2)
    scale = _agent(16, NODE_16, 1.0, 3 if smoke else 60, 1 if smoke else 10)
    # Every interval at the agent's own defaults (fast and processes 5 s, gpm 10 s, slow 30 s,
    # export 10 s): what a node pays when nobody tunes anything. 120 s = 24 fast cycles.
    defaults_8 = AgentCase("agent-8gpu-defaults", NODE_8, DEFAULT_FAST_INTERVAL_S,
                           1 if smoke else 24, 1 if smoke else 2, at_defaults=True)
    # The same node with AMD MI300X through amdsmi (simulated libamd_smi.so).
    amd_8 = AgentCase("agent-8amd-1s", NODE_8_AMD, 1.0, 3 if smoke else 60, 2 if smoke else 10)
    # The same eight H100s with MIG on, 7 instances each (56 MIG devices), beside fast_8.
    mig_8 = AgentCase("agent-8gpu-mig7-1s", NODE_8_MIG, 1.0, 3 if smoke else 60,
                      2 if smoke else 10)
    # A process's cost (issue 41): fast_8's GPUs with 256 processes each, every one of them
    # with a utilization sample each second. Full run only (2,048 placeholder processes).
    procs_8 = AgentCase("agent-8gpu-2048proc-1s", NODE_8_2048, 1.0, 60, 10)
    # The smoke run keeps one case of each kind (one agent case, a peer of each sort, one
    # churn): the other shapes run the same code on other scenario files (which
    # tests/unit/simulator loads anyway) or at other intervals (the defaults' first export
    # alone takes 10 s).
    return Plan(
        smoke=smoke,
        agent=((fast_8,) if smoke else (fast_8, slow_8, defaults_8, scale, amd_8, mig_8,
                                         procs_8)),
        nvitop_exporter=((_nvitop(1.0, 2, fast_8),) if smoke else
                         (_nvitop(1.0, 60, fast_8), _nvitop(slow, 6, slow_8))),
        gpustat=(PeerCase("gpustat-8gpu", NODE_8, 1.0, 2 if smoke else 10, fast_8.name),),
        encode=(EncodeCase("encode-8gpu", NODE_8, 5 if smoke else 200),
                EncodeCase("encode-16gpu", NODE_16, 5 if smoke else 200)),
        # 50 GPU processes; the smoke run keeps the contrast but spawns fewer idle processes.
        attribution=(
            AttributionCase("attribution-50idle", 50, 20 if smoke else 500),
            AttributionCase(f"attribution-{500 if smoke else 5000}idle",
                            500 if smoke else 5000, 20 if smoke else 500),
        ),
        # XID -> receiver latency, one event at a time (the smoke run only proves it works).
        events=(EventCase("events-8gpu", NODE_8, 20 if smoke else 200),),
        # 10 000 copies of one XID on one GPU, sampling every 0.25 s with a 1 s storm window
        # (the integration test's storm, on the 8-GPU node); the smoke run injects fewer.
        storm=(StormCase("xid-storm", NODE_8, 1_000 if smoke else 10_000, interval=0.25,
                         storm_window=1.0, rest_s=1.0 if smoke else 5.0),),
        # The eBPF plugin's overhead (root only; skipped with the reason elsewhere).
        ebpf_call_cost=(
            EbpfCallCostCase("ebpf-call-cost", NODE_8, 5_000 if smoke else 100_000,
                             1 if smoke else 5, entry="nop"),
            EbpfCallCostCase("ebpf-call-cost-endbr64", NODE_8, 1_000 if smoke else 20_000,
                             1 if smoke else 5, entry="endbr64"),
        ),
        ebpf_load=(EbpfLoadCase("ebpf-100k", NODE_8, 1.0, 2 if smoke else 20, 100_000),),
        # The Prometheus endpoint: gzip/OpenMetrics scrape of 16 GPUs, 300 idle sockets at once.
        prometheus=(PrometheusFloodCase("prometheus-flood", NODE_16, 300, 2 if smoke else 20),),
        # Host process churn: 500 short non-GPU execs a second, attribution on and off.
        churn=tuple(ChurnCase(f"churn-500-attribution-{'on' if on else 'off'}", NODE_8, 500.0,
                              1.0 if smoke else 30.0, attribution=on)
                    for on in ((True,) if smoke else (True, False))),
        # NVML answering 2 % of calls with an error nvml.h documents for that call, seeded.
        chaos=(ChaosCase("nvml-chaos", NODE_16,
                         chaos_minutes if chaos_minutes is not None
                         else (0.1 if smoke else CHAOS_MINUTES),
                         calm_s=2.0 if smoke else 10.0, rss_every_s=2.0 if smoke else 10.0),),
        # Memory: sampling every 0.25 s while a real short-lived GPU process comes and goes
        # every second (its own block of docs/benchmarks.md: minutes alone).
        soak=(SoakCase("soak", NODE_8, 0.1 if smoke else SOAK_MINUTES,
                       rss_every_s=2.0 if smoke else 10.0),),
        # Health events through kill -9, collector outages, throttling and a poison record
        # (issue 30): injected vs delivered, duplicates, quarantined, the longest wait.
        faults=(FaultCase("fault-soak", NODE_8, 0.15 if smoke else FAULT_MINUTES,
                          mean_gap_s=4.0 if smoke else 20.0,
                          settle_s=20.0 if smoke else 90.0),),
        # Hostile peers (issue 39): idle TLS waves, a password flood, a collector answering
        # 128 MiB bodies, against one agent serving /metrics over TLS with basic auth.
        hostile=(HostileCase("hostile-peers", NODE_8, waves=1 if smoke else 3,
                             per_wave=100 if smoke else 500,
                             flood_clients=16 if smoke else 64,
                             flood_s=3.0 if smoke else 30.0,
                             body_mib=16 if smoke else 128),),
    )
