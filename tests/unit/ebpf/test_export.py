"""CUDA activity, as node-level samples, reaches every exporter: OTLP points and both
Prometheus schemes, with its own attributes and counter start times."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.prometheus.dcgm_scheme import DcgmTranslator
from gpu_otel_agent.export.prometheus.exposition import Families, render
from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
from gpu_otel_agent.model.snapshot import AgentSample, NodeSnapshot, SnapshotStore
from gpu_otel_agent.model.workload import GpuProcess, Workload
from gpu_otel_agent.plugins.ebpf.activity import Activity
from gpu_otel_agent.plugins.ebpf.layout import CudaStats

S = 1_000_000_000
POD = Workload(container_id="c1", pod_uid="u1", pod_name="trainer", namespace="ml",
               container_name="main")


def _snapshot() -> NodeSnapshot:
    samples = Activity(300 * S).samples(
        {7: GpuProcess(7, "python", POD)},
        {7: CudaStats(kernel_launches=1200, graph_launches=3, sync_ns=1_500_000_000,
                      allocated=4096, peak=8192)}, now_ns=5 * S)
    store = SnapshotStore()
    store.put_node_samples("ebpf", samples)
    return store.current(6 * S)


def _samples(families: Families) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(render(families).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_series_carry_the_samples_attributes_and_start_time() -> None:
    points = series(_snapshot())
    (kernel,) = [p for p in points["gpu.process.cuda.kernel_launches"]
                 if dict(p.attributes)["gpu.cuda.launch.type"] == "kernel"]
    assert kernel.value == 1200
    assert dict(kernel.attributes)["k8s.pod.name"] == "trainer"
    assert "hw.id" not in dict(kernel.attributes)
    assert (kernel.start_time_ns, kernel.time_ns) == (5 * S, 5 * S)
    (pod_sync,) = points["gpu.container.cuda.sync.time"]
    assert pod_sync.value == 1.5


def test_both_prometheus_schemes_serve_them_under_their_otel_names() -> None:
    resource = {"service.name": "gpu-otel-agent", "host.name": "vm-1"}
    for families in (otel_families(series(_snapshot()), resource),
                     DcgmTranslator(resource).families(series(_snapshot()))):
        samples = _samples(families)
        kernel = [v for labels, v in samples["gpu_process_cuda_kernel_launches_total"]
                  if labels["gpu_cuda_launch_type"] == "kernel"
                  and labels["k8s_pod_name"] == "trainer"]
        assert kernel == [1200]
        assert [v for _, v in samples["gpu_process_cuda_memory_allocated_bytes"]] == [4096]
        assert [v for _, v in samples["gpu_container_cuda_sync_time_seconds_total"]] == [1.5]


def test_a_source_withdraws_its_samples_with_an_empty_tuple() -> None:
    store = SnapshotStore()
    store.put_node_samples("ebpf", (AgentSample((), 0, 0),))
    store.put_node_samples("ebpf", ())
    assert store.current(S).node == ()
