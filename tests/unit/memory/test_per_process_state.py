"""Every structure that keeps something per GPU process returns to its size once the processes
have come and gone: a thousand short-lived processes leave nothing behind (the soak benchmark
measures the whole agent's RSS; these name the structure that would leak)."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity
from gpu_otel_agent.model.workload import GpuProcess, Workload
from gpu_otel_agent.plugins.ebpf.activity import Activity
from gpu_otel_agent.plugins.ebpf.layout import CudaStats
from gpu_otel_agent.plugins.nvidia.process_utilization import ProcessUtilization, UtilSample
from gpu_otel_agent.workloads.attribution import Attribution, AttributionSettings
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver
from tests.unit.memory.deep_size import deep_size

GPUS = [DeviceIdentity(f"GPU-{i}", i, "nvidia", "H100", f"00000000:{0x18 + i:02X}:00.0")
        for i in range(2)]
STEADY = (1, 2, 3)  # long-running processes on each GPU
S = 1_000_000_000
# Slack for a dict's table growing by one step and small ints; far below what a thousand
# processes would leave (each kept entry costs well over 100 bytes).
SLACK = 4096


def _proc(root: Path, pid: int) -> None:
    base = root / str(pid)
    base.mkdir()
    uid = f"aaaaaaaa-1111-2222-3333-{pid:012d}"
    (base / "cgroup").write_text(f"0::/kubepods/pod{uid}/{'c' * 64}\n")
    (base / "comm").write_text(f"job-{pid}\n")
    (base / "stat").write_text(f"{pid} (job) S 1 1 1\n")


def test_attribution_forgets_processes_that_came_and_went(tmp_path: Path) -> None:
    for pid in STEADY:
        _proc(tmp_path, pid)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    attribution = Attribution(resolver, AttributionSettings())

    def cycle(extra: tuple[int, ...]) -> None:
        for gpu in GPUS:
            listed = (*STEADY, *(p for p in extra if p % 2 == gpu.index))
            attribution.readings(gpu, tuple(ProcessUsage(p, p * 1000) for p in listed))

    def churn(first: int, count: int) -> None:
        for pid in range(first, first + count):
            _proc(tmp_path, pid)
            cycle((pid,))  # listed for a few cycles while it lives
            cycle((pid,))
            shutil.rmtree(tmp_path / str(pid))
            if pid % 3 == 0:
                resolver.on_exit(pid)  # the exit event arrived first; otherwise the list
            cycle(())  # ...stops naming it
            resolver.reconcile()

    churn(100, 50)  # warm-up: every table has grown to its working size
    baseline = deep_size(attribution)
    churn(1000, 1000)
    assert deep_size(attribution) <= baseline + SLACK
    assert {p.pid for g in GPUS for p in attribution.processes_on(g.uuid)} == set(STEADY)


def test_process_utilization_keeps_only_listed_processes() -> None:
    now = [10 * S // 1000]
    util = ProcessUtilization(lambda: now[0])

    def churn(first: int, count: int) -> None:
        for pid in range(first, first + count):
            now[0] += 250_000
            util.add([UtilSample.from_percent(p, now[0] - 1000, 30, 0, 0)
                      for p in (*STEADY, pid)])
            util.figures({*STEADY, pid}, answered=True)
            util.figures(set(STEADY), answered=True)  # it exited: no longer listed

    churn(100, 50)
    baseline = deep_size(util)
    churn(1000, 1000)
    assert deep_size(util) <= baseline + SLACK


def test_cuda_activity_forgets_processes_and_expired_containers() -> None:
    activity = Activity(retention_ns=5 * S)
    steady = {p: GpuProcess(p, "server", Workload(pod_uid="steady", pod_name="s",
                                                  namespace="ml")) for p in STEADY}
    clock = [S]

    def churn(first: int, count: int) -> None:
        for pid in range(first, first + count):
            clock[0] += S
            # Each short-lived process in its own pod: its container totals outlive it by
            # the retention, then go.
            process = GpuProcess(pid, "job", Workload(pod_uid=f"pod-{pid}", pod_name=f"j{pid}",
                                                      namespace="ml"))
            stats = {p: CudaStats(kernel_launches=pid) for p in (*STEADY, pid)}
            activity.samples({**steady, pid: process}, stats, clock[0])
            activity.retire(pid, stats[pid], clock[0])
            clock[0] += S
            activity.samples(steady, {p: stats[p] for p in STEADY}, clock[0])

    churn(100, 50)
    baseline = deep_size(activity)
    churn(1000, 1000)
    assert deep_size(activity) <= baseline + SLACK
