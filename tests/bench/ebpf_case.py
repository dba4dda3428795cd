"""The eBPF plugin's overhead: what one traced CUDA call costs, and the agent's CPU while a
process makes 100 000 kernel launches a second.

Both cases run the real agent (``ebpf: {enabled: true}``) on the 8-GPU bench node, with the
stand-in CUDA workload (tests/cuda_standin) registered with the node as a GPU process: the
agent finds it through NVML and attribution and attaches its uprobes exactly as on a real
node, and its log says when ("tracing ..." / "stopped tracing ..."). The workload runs from
its own copy of the stand-in libraries: uprobes are per file (inode) and system-wide, so a
shared copy could carry another test's probes while we time it.

``ebpf-call-cost`` alternates untraced and traced ``spin N`` (N cudaLaunchKernel back to
back, each forwarded to cuLaunchKernel: two uprobes per call), attaching and detaching by
adding the workload to and removing it from the node's process list; ns per traced call is
the median over the pairs of (traced - untraced) / N. The agent's own count of the
workload's launches (``gpu.process.cuda.kernel_launches`` at the receiver) must equal the
traced calls, and the stand-in's driver must have seen every nested call.

``ebpf-100k`` runs one agent with the plugin off, then one with it on, on the same node and
intervals as ``agent-8gpu-1s`` while the workload runs ``busy 100000``: the agent's CPU (and
the workload's, where the uprobes' cost lands) over cycle-aligned windows.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpu_otel_agent.plugins.ebpf.compile_bpf import OBJECT
from gpu_otel_agent.plugins.ebpf.support import missing_support
from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.agent_case import run_summary, summed
from tests.bench.procstat import peak_rss_mib
from tests.bench.results import EbpfCallCostResult, EbpfLoadResult, EbpfLoadRun
from tests.bench.window import measure
from tests.cuda_standin.build import BuildError, build_standin
from tests.cuda_standin.driver import BusyResult, CudaWorkload
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

ATTACHED = re.compile(r"\btracing \S+ \((libcudart|libcuda), \d+ probes")
DETACHED = re.compile(r"\bstopped tracing \S+")
LAUNCHES = "gpu.process.cuda.kernel_launches"
TRACED_FUNCTIONS = (("libcudart.so.12", "cudaLaunchKernel"), ("libcuda.so.1", "cuLaunchKernel"))
# How the traced functions open decides what a uprobe costs: the kernel emulates a nop or a
# push in place, and single-steps an endbr64 (CET builds) out of line, a second trap (some
# 16 us per probe on the VM this was written on, against 0.5 us for a nop or a push). The
# stand-in's driver functions are tiny leaves that would open with a `lock` instruction (which
# cannot be probed at all), so each variant fixes the opening.
X86 = platform.machine() == "x86_64"
ENTRIES: dict[str, tuple[str, ...]] = {
    "nop": (*(("-fcf-protection=none",) if X86 else ()), "-fpatchable-function-entry=1"),
    "endbr64": ("-fcf-protection=full",),
}
LIBRARIES_PER_WORKLOAD = 2  # libcudart + libcuda: the agent attaches to both
CALL_COST_METHOD = (
    "real agent (ebpf enabled, processes group every {processes:g} s) on {scenario}; the "
    "stand-in workload's cudaLaunchKernel (runtime uprobe, then the nested cuLaunchKernel's "
    "driver uprobe) timed by the workload over spin {calls}, untraced and traced in "
    "{repetitions} alternating pairs; attach/detach by adding/removing the workload as a GPU "
    "process on the simulated node"
)


@dataclass(frozen=True)
class EbpfCallCostCase:
    name: str
    scenario: Path
    calls: int  # cudaLaunchKernel per spin
    repetitions: int  # untraced/traced pairs
    entry: str = "nop"  # how the traced functions open (ENTRIES)
    processes_interval: float = 0.5  # how soon the agent sees the workload come and go


@dataclass(frozen=True)
class EbpfLoadCase:
    name: str
    scenario: Path
    interval: float
    cycles: int  # window length per run, in fast cycles
    rate: float  # cudaLaunchKernel per second
    entry: str = "nop"


def unsupported(entry: str) -> str | None:
    """Why an eBPF case cannot run on this machine, or None."""
    if entry == "endbr64" and not X86:
        return "endbr64 is an x86-64 instruction"
    if os.geteuid() != 0:
        return "needs root (the agent loads BPF programs: CAP_BPF + CAP_PERFMON)"
    reason = missing_support(OBJECT)
    if reason is not None:
        return reason
    try:
        build_standin(extra_flags=ENTRIES[entry])
    except BuildError as error:
        return f"the CUDA stand-in cannot be built: {error}"
    return None


def entry_instruction(library: Path, function: str) -> str:
    """The first instruction of ``function`` as objdump spells it ("unknown" without
    binutils). It decides the cost of a uprobe: the kernel emulates some (push, nop) and
    single-steps the others out of line, which costs far more."""
    nm, objdump = shutil.which("nm"), shutil.which("objdump")
    if nm is None or objdump is None:
        return "unknown"
    symbols = subprocess.run([nm, "-D", "--defined-only", str(library)], capture_output=True,
                             text=True, check=False).stdout
    for line in symbols.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[2].split("@", 1)[0] == function:
            start = int(fields[0], 16)
            listing = subprocess.run(
                [objdump, "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
                 f"--stop-address={start + 16:#x}", str(library)],
                capture_output=True, text=True, check=False).stdout
            for row in listing.splitlines():
                address, _, instruction = row.partition(":\t")
                if instruction and address.strip() == f"{start:x}":
                    return " ".join(instruction.split())
    return "unknown"


# Detaching a uprobe waits for the kernel's RCU grace periods (about 0.1 s each here, 22
# probes per library), so an agent tracing two libraries needs more than the default 4.5 s
# to stop cleanly; the bench wants its run summary and reports how long stopping took.
SHUTDOWN_TIMEOUT_S = 20.0


def _config(path: Path, ebpf: bool, processes_interval: float | None = None) -> Path:
    config: dict[str, object] = {"log_level": "info", "ebpf": {"enabled": ebpf},
                                 "shutdown_timeout": SHUTDOWN_TIMEOUT_S}
    if processes_interval is not None:
        config["groups"] = {"processes": {"interval": processes_interval}}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _start_agent(workdir: Path, receiver: OtlpGrpcReceiver, node: SimulatedNode, config: Path,
                 interval: float) -> AgentProcess:
    return AgentProcess(workdir, receiver.endpoint, node.env,
                        ["--config", str(config), "--interval", f"{interval:g}",
                         "--export-interval", f"{interval:g}"])


def _wait_log_count(agent: AgentProcess, pattern: re.Pattern[str], count: int,
                    timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while len(pattern.findall(agent.log())) < count:
        if time.monotonic() > deadline or agent.process.poll() is not None:
            raise RuntimeError(f"agent did not log {pattern.pattern!r} {count} times:\n"
                               f"{agent.log()[-3000:]}")
        time.sleep(0.02)


def _add(node: SimulatedNode, pid: int) -> None:
    node.command({"op": "proc_add", "device": 0, "pid": pid, "type": "compute",
                  "used_memory_mib": 100, "sm_util": 10})


def _counted(store: Store, pid: int, expected: int, timeout: float = 10) -> int:
    """The agent's exported launch count for ``pid`` once it reaches ``expected``."""
    def reached(store: Store) -> int | None:
        point = store.latest(LAUNCHES, {"process.pid": pid, "gpu.cuda.launch.type": "kernel"})
        return int(point.value) if point is not None and point.value >= expected else None
    try:
        return store.wait_for(reached, timeout=timeout, what=f"{LAUNCHES} >= {expected}")
    except AssertionError:
        point = store.latest(LAUNCHES, {"process.pid": pid, "gpu.cuda.launch.type": "kernel"})
        raise RuntimeError(f"the agent counted {point.value if point else 'no'} launches of "
                           f"process {pid}, expected {expected}") from None


@contextmanager
def _workload(workdir: Path, entry: str) -> Iterator[CudaWorkload]:
    # Its own copy of the libraries (see the module docstring).
    build = build_standin(extra_flags=ENTRIES[entry])
    with CudaWorkload(build, library_dir=workdir / "cuda") as workload:
        yield workload


def run_call_cost_case(case: EbpfCallCostCase, workdir: Path) -> EbpfCallCostResult:
    workdir.mkdir(parents=True, exist_ok=True)
    config = _config(workdir / "agent.yaml", True, case.processes_interval)
    untraced: list[int] = []
    traced: list[int] = []
    with OtlpGrpcReceiver() as receiver, \
            SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node, \
            _workload(workdir, case.entry) as workload:
        entries = {f"{function}": entry_instruction(workload.library_dir / library, function)
                   for library, function in TRACED_FUNCTIONS}
        workload.spin(case.calls)  # warm: pages faulted in, caches filled
        agent = _start_agent(workdir, receiver, node, config, 1.0)
        try:
            receiver.store.wait_for(lambda s: s.received("metrics"), timeout=30,
                                    what="the agent's first export")
            driver_before = workload.driver_calls("cuLaunchKernel")
            counted = 0
            for rep in range(1, case.repetitions + 1):
                untraced.append(workload.spin(case.calls))
                _add(node, workload.pid)
                _wait_log_count(agent, ATTACHED, LIBRARIES_PER_WORKLOAD * rep)
                traced.append(workload.spin(case.calls))
                if rep == case.repetitions:  # every traced call counted, each once
                    counted = _counted(receiver.store, workload.pid, rep * case.calls)
                node.command({"op": "proc_rm", "pid": workload.pid})
                _wait_log_count(agent, DETACHED, LIBRARIES_PER_WORKLOAD * rep)
            nested = workload.driver_calls("cuLaunchKernel") - driver_before
            agent.terminate(timeout=SHUTDOWN_TIMEOUT_S + 5)
        finally:
            agent.close()
    made = 2 * case.repetitions * case.calls
    if nested != made:
        raise RuntimeError(f"the stand-in driver saw {nested} cuLaunchKernel, expected {made}")
    if counted != case.repetitions * case.calls:
        raise RuntimeError(f"the agent counted {counted} launches, traced "
                           f"{case.repetitions * case.calls}")
    overheads = [(t - u) / case.calls for u, t in zip(untraced, traced, strict=True)]
    return EbpfCallCostResult(
        case=case.name,
        method=CALL_COST_METHOD.format(processes=case.processes_interval,
                                       scenario=case.scenario.name, calls=case.calls,
                                       repetitions=case.repetitions),
        calls_per_repetition=case.calls,
        repetitions=case.repetitions,
        uprobes_per_call=len(TRACED_FUNCTIONS),
        entry=case.entry,
        entry_instructions=entries,
        untraced_ns_per_call=round(statistics.median(u / case.calls for u in untraced), 1),
        traced_ns_per_call=round(statistics.median(t / case.calls for t in traced), 1),
        overhead_ns_per_call=round(statistics.median(overheads), 1),
        overhead_ns_min=round(min(overheads), 1),
        overhead_ns_max=round(max(overheads), 1),
        launches_counted=counted,
    )


def _load_run(case: EbpfLoadCase, workdir: Path, node: SimulatedNode,
              workload: CudaWorkload, plugin: bool) -> EbpfLoadRun:
    workdir.mkdir(parents=True, exist_ok=True)
    config = _config(workdir / "agent.yaml", plugin)
    with OtlpGrpcReceiver() as receiver:
        agent = _start_agent(workdir, receiver, node, config, case.interval)
        alive = lambda: agent.process.poll() is None  # noqa: E731
        try:
            receiver.store.wait_for(lambda s: s.received("metrics"), timeout=30,
                                    what="the agent's first export")
            if plugin:
                _wait_log_count(agent, ATTACHED, LIBRARIES_PER_WORKLOAD)
            # The busy command outlasts the window: aligning on bursts adds up to ~2 cycles.
            seconds = (case.cycles + 3) * case.interval
            busy: list[BusyResult] = []
            runner = threading.Thread(
                target=lambda: busy.append(workload.busy(case.rate, seconds)), daemon=True)
            runner.start()
            time.sleep(0.2)  # ramped up
            window = measure(node, agent.process.pid, case.interval, case.cycles, alive,
                             also=(workload.pid,))
            if not runner.is_alive():
                raise RuntimeError("the busy workload ended inside the window")
            rss = peak_rss_mib(agent.process.pid)
            runner.join(timeout=seconds + 10)
            if not busy:
                raise RuntimeError(f"busy did not reply; stderr: {workload.stderr()!r}")
            counted = _counted(receiver.store, workload.pid, busy[0].calls) if plugin else None
            stop_s = agent.terminate(timeout=SHUTDOWN_TIMEOUT_S + 5)
            summary = run_summary(agent.log())
        finally:
            agent.close()
    (workload_cpu,) = window.also_cpu_s
    return EbpfLoadRun(
        plugin="on" if plugin else "off",
        window_s=round(window.seconds, 2),
        cycles=window.cycles,
        agent_cpu_percent_one_core=round(window.cpu_percent, 3),
        agent_cpu_ms_per_cycle=round(window.cpu_s * 1000 / max(window.cycles, 1), 3),
        agent_peak_rss_mib=round(rss, 1),
        workload_cpu_percent_one_core=round(workload_cpu / window.seconds * 100, 2),
        launches_made=busy[0].calls,
        launches_per_s=round(busy[0].calls / (busy[0].elapsed_ns / 1e9)),
        launches_counted=counted,
        missed_cycles=summed(summary, "missed_cycles"),
        agent_stop_s=round(stop_s, 2),
    )


def run_load_case(case: EbpfLoadCase, workdir: Path) -> EbpfLoadResult:
    workdir.mkdir(parents=True, exist_ok=True)
    gpus = len(load_scenario(case.scenario).devices)
    with SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node, \
            _workload(workdir, case.entry) as workload:
        _add(node, workload.pid)  # a GPU process in both runs: the same attribution work
        off = _load_run(case, workdir / "off", node, workload, plugin=False)
        on = _load_run(case, workdir / "on", node, workload, plugin=True)
    return EbpfLoadResult(case=case.name, scenario=case.scenario.name, gpus=gpus,
                          interval_s=case.interval, rate_requested=case.rate, entry=case.entry,
                          off=off, on=on)
