"""Per-process and per-container CUDA readings, and container totals across process exits."""

from __future__ import annotations

from gpu_otel_agent.model.snapshot import AgentSample
from gpu_otel_agent.model.workload import GpuProcess, Workload
from gpu_otel_agent.plugins.ebpf.activity import Activity
from gpu_otel_agent.plugins.ebpf.layout import CudaStats

S = 1_000_000_000
POD = Workload(container_id="c1", pod_uid="u1", pod_name="trainer", namespace="ml")
JOB = Workload(slurm_job_id="42")


def _values(samples: tuple[AgentSample, ...], metric: str,
            **attrs: object) -> list[float | int]:
    wanted = {k.replace("__", "."): v for k, v in attrs.items()}
    return [r.value for s in samples for r in s.readings
            if r.metric == metric and all(dict(r.attributes).get(k) == v
                                          for k, v in wanted.items())]


def _stats(launches: int = 0, allocated: int = 0, sync_ns: int = 0) -> CudaStats:
    return CudaStats(kernel_launches=launches, graph_launches=1, sync_ns=sync_ns,
                     allocated=allocated, peak=allocated)


def test_a_process_has_its_own_series_and_its_container_the_sum() -> None:
    activity = Activity(retention_ns=300 * S)
    processes = {1: GpuProcess(1, "train", POD), 2: GpuProcess(2, "train", POD),
                 3: GpuProcess(3, "solo", Workload())}
    samples = activity.samples(processes, {1: _stats(10, 100, S // 2), 2: _stats(5, 50),
                                           3: _stats(1)}, now_ns=S)
    assert _values(samples, "gpu.process.cuda.kernel_launches", process__pid=1,
                   gpu__cuda__launch__type="kernel") == [10]
    assert _values(samples, "gpu.process.cuda.sync.time", process__pid=1) == [0.5]
    assert _values(samples, "gpu.container.cuda.kernel_launches", k8s__pod__uid="u1",
                   gpu__cuda__launch__type="kernel") == [15]
    assert _values(samples, "gpu.container.cuda.kernel_launches", k8s__pod__uid="u1",
                   gpu__cuda__launch__type="graph") == [2]
    assert _values(samples, "gpu.container.cuda.memory.allocated", k8s__pod__uid="u1") == [150]
    # A process without a workload has process series only.
    assert len(_values(samples, "gpu.container.cuda.memory.allocated")) == 1
    assert _values(samples, "gpu.process.cuda.memory.peak", process__pid=3) == [0]


def test_a_traced_process_that_is_not_on_a_gpu_is_not_reported() -> None:
    samples = Activity(300 * S).samples({}, {9: _stats(3)}, now_ns=S)
    assert samples == ()


def test_container_counters_keep_an_exited_process_and_drop_its_memory() -> None:
    activity = Activity(retention_ns=300 * S)
    processes = {1: GpuProcess(1, "train", POD), 2: GpuProcess(2, "train", POD)}
    activity.samples(processes, {1: _stats(10, 100), 2: _stats(5, 50)}, now_ns=S)
    activity.retire(2, _stats(7, 50, 2 * S), now_ns=2 * S)  # its final counters
    samples = activity.samples({1: processes[1]}, {1: _stats(11, 100)}, now_ns=3 * S)
    assert _values(samples, "gpu.container.cuda.kernel_launches", k8s__pod__uid="u1",
                   gpu__cuda__launch__type="kernel") == [18]
    assert _values(samples, "gpu.container.cuda.memory.allocated", k8s__pod__uid="u1") == [100]
    assert _values(samples, "gpu.container.cuda.sync.time", k8s__pod__uid="u1") == [2.0]
    assert not _values(samples, "gpu.process.cuda.kernel_launches", process__pid=2)
    # Counters start when the container was first seen, not at each sample.
    starts = {s.start_time_ns for s in samples}
    assert starts == {S}


def test_a_containers_totals_outlive_its_last_process_for_the_retention_only() -> None:
    activity = Activity(retention_ns=10 * S)
    activity.samples({1: GpuProcess(1, "job", JOB)}, {1: _stats(4)}, now_ns=S)
    activity.retire(1, _stats(6), now_ns=2 * S)
    kept = activity.samples({}, {}, now_ns=11 * S)
    assert _values(kept, "gpu.container.cuda.kernel_launches", slurm__job__id="42",
                   gpu__cuda__launch__type="kernel") == [6]
    assert activity.samples({}, {}, now_ns=13 * S) == ()


def test_a_process_that_exits_before_its_first_sample_is_not_counted_twice() -> None:
    activity = Activity(retention_ns=300 * S)
    activity.retire(5, _stats(9), now_ns=S)  # never seen: no workload known, nothing kept
    assert activity.samples({}, {}, now_ns=2 * S) == ()


def test_process_series_are_bounded_the_rest_counted_and_still_in_their_container() -> None:
    activity = Activity(retention_ns=300 * S, max_process_series=2)
    processes = {pid: GpuProcess(pid, "worker", POD) for pid in (1, 2, 3)}
    samples = activity.samples(processes, {1: _stats(5), 2: _stats(50), 3: _stats(20)},
                               now_ns=S)
    kernel = {dict(r.attributes)["process.pid"]: r.value for s in samples for r in s.readings
              if r.metric == "gpu.process.cuda.kernel_launches"
              and dict(r.attributes)["gpu.cuda.launch.type"] == "kernel"}
    assert kernel == {2: 50, 3: 20}  # the busiest two
    assert _values(samples, "gpu.process.cuda.series.overflow") == [1]
    assert _values(samples, "gpu.container.cuda.kernel_launches", k8s__pod__uid="u1",
                   gpu__cuda__launch__type="kernel") == [75]
    # The one left out still hands its counters to the container when it exits.
    activity.retire(1, _stats(6), now_ns=2 * S)
    later = activity.samples({2: processes[2], 3: processes[3]},
                             {2: _stats(50), 3: _stats(20)}, now_ns=3 * S)
    assert _values(later, "gpu.container.cuda.kernel_launches", k8s__pod__uid="u1",
                   gpu__cuda__launch__type="kernel") == [76]
    assert _values(later, "gpu.process.cuda.series.overflow") == [0]
