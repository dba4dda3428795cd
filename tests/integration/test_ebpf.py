"""The eBPF plugin end to end: the real BPF object loaded into this kernel, uprobes on the
stand-in CUDA libraries (tests/cuda_standin) mapped by real processes in real pod cgroups, the
simulated node listing them as GPU processes, a kubelet speaking pod-resources v1, and the
values that arrive at a real OTLP receiver compared with the calls the processes made."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.ebpf import compile_bpf
from gpu_otel_agent.plugins.ebpf.libraries import LibraryFile, MappedLibrary
from gpu_otel_agent.plugins.ebpf.plugin import EbpfSettings, open_plugin
from gpu_otel_agent.plugins.ebpf.symbols import RUNTIME_PROBES, LibraryKind
from gpu_otel_agent.plugins.ebpf.tracer import Tracer
from gpu_otel_agent.plugins.ebpf.uprobes import ProbeSet
from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.lifecycle import ProcessCallbacks
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.cuda_standin.driver import CudaWorkload, can_unshare_mount
from tests.cuda_standin.toolkit import runtime_library
from tests.integration.cgroups import Cgroups, Pod
from tests.integration.conftest import UUIDS
from tests.integration.exports import select, wait_export
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.2", "--export-interval", "0.3"]
LAUNCHES = "gpu.process.cuda.kernel_launches"
ALLOCATED = "gpu.process.cuda.memory.allocated"
PEAK = "gpu.process.cuda.memory.peak"
SYNC = "gpu.process.cuda.sync.time"
POD_LAUNCHES = "gpu.container.cuda.kernel_launches"
POD_ALLOCATED = "gpu.container.cuda.memory.allocated"
POD_SYNC = "gpu.container.cuda.sync.time"
LIBRARIES = "gpu_agent.ebpf.library.count"


@pytest.fixture(scope="module")
def bpf_object() -> Path:
    """The object CI builds (``python -m gpu_otel_agent.plugins.ebpf.compile_bpf``), or built
    here."""
    if os.geteuid() != 0:
        pytest.skip("loading BPF programs needs root (CAP_BPF and CAP_PERFMON)")
    if not compile_bpf.OBJECT.exists():
        try:
            compile_bpf.build()
        except compile_bpf.BuildError as error:
            pytest.skip(f"cannot build the BPF object here: {error}")
    return compile_bpf.OBJECT


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    devices = [h100(i, uuid=UUIDS[i]) for i in range(2)]
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": devices})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as sim:
        yield sim


def _config(tmp_path: Path, socket: Path | None, process_events: str = "netlink",
            **ebpf: str) -> list[str]:
    kubelet = f"{{socket: {socket}, refresh_interval: 1, timeout: 2}}" if socket else \
        "{socket: null}"
    lines = [
        "groups: {processes: {interval: 0.2}, slow: {interval: 5}}",
        "health: {enabled: false}",
        "attribution:",
        "  reconcile_interval: 1",
        f"  kubelet: {kubelet}",
        f"  process_events: {process_events}",
        "ebpf:",
        "  enabled: true",
        "  interval: 0.2",
        *(f"  {k}: {v}" for k, v in ebpf.items()),
    ]
    path = tmp_path / "agent.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [*FAST, "--config", str(path)]


def _on_gpu(node: SimulatedNode, pid: int, device: int = 0) -> None:
    answer = node.command({"op": "proc_add", "device": device, "pid": pid, "type": "compute",
                           "used_memory_mib": 100, "sm_util": 10})
    assert answer["ok"], answer


def _pod(pod: Pod, device: str) -> PodAllocation:
    return PodAllocation(pod.namespace, pod.name, (ContainerAllocation(
        "main", (ContainerDevices("nvidia.com/gpu", (device,)),)),))


def _value(points: list[Point], metric: str, **attrs: object) -> float:
    (point,) = select(points, metric, **attrs)
    return point.value


def _launches(points: list[Point], metric: str = LAUNCHES, **attrs: object) -> tuple[float, ...]:
    return (_value(points, metric, gpu__cuda__launch__type="kernel", **attrs),
            _value(points, metric, gpu__cuda__launch__type="graph", **attrs))


@pytest.mark.usefixtures("bpf_object")
def test_exact_calls_per_process_and_per_pod(
    node: SimulatedNode, groups: Cgroups, v2: Path,
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    pod = groups.pod(v2, "trainer", "burstable", "cgroupfs")
    store = otlp_grpc_receiver.store
    with FakeKubelet(tmp_path / "kubelet" / "kubelet.sock") as kubelet, \
            CudaWorkload(cgroup=pod.cgroup, env={"HOSTNAME": pod.name}) as first, \
            CudaWorkload(cgroup=pod.cgroup, env={"HOSTNAME": pod.name}) as second:
        kubelet.set_pods([_pod(pod, f"{UUIDS[0]}::1")])
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             _config(tmp_path, kubelet.socket_path, process_events="ebpf"))
        try:
            # Nothing is traced before a GPU process maps the libraries.
            points = wait_export(store, lambda pts: select(pts, LIBRARIES), "self-telemetry")
            assert _value(points, LIBRARIES) == 0
            _on_gpu(node, first.pid)
            _on_gpu(node, second.pid)
            # Both map the same libcudart and libcuda files: two libraries traced, not four;
            # each process starts at zero, named with its pod.
            points = wait_export(store, lambda pts: len(select(
                pts, LAUNCHES, k8s__pod__name=pod.name, gpu__cuda__launch__type="kernel")) == 2,
                "both processes traced and named")
            assert _value(points, LIBRARIES) == 2
            assert _launches(points, process__pid=first.pid) == (0, 0)

            first.launch(1000)           # runtime -> driver: counted once
            first.launch_driver(10)      # the driver alone (as CuPy does): counted
            first.graph(5)
            first.malloc(1 << 20)
            freed = first.malloc(4096)
            first.free(freed)
            first.fail_malloc()          # a failed allocation holds nothing
            first.sync("stream", 3, 2_000_000)
            second.launch(500, "ptsz")
            second.malloc_driver(8192)
            second.managed(512)

            points = wait_export(
                store, lambda pts: _launches(pts, process__pid=second.pid)[0] == 500
                and _launches(pts, process__pid=first.pid) == (1010, 5), "the calls counted")
            assert _value(points, ALLOCATED, process__pid=first.pid) == 1 << 20
            assert _value(points, PEAK, process__pid=first.pid) == (1 << 20) + 4096
            assert _value(points, ALLOCATED, process__pid=second.pid) == 8192 + 512
            assert _value(points, PEAK, process__pid=second.pid) == 8192 + 512
            sync = _value(points, SYNC, process__pid=first.pid)
            assert 0.006 <= sync < 1.0  # three syncs of 2 ms each, measured in the kernel
            assert _value(points, SYNC, process__pid=second.pid) == 0
            first_attrs = select(points, ALLOCATED, process__pid=first.pid)[0].attributes
            assert first_attrs["k8s.pod.uid"] == pod.uid
            assert first_attrs["container.id"] == pod.container_id
            assert first_attrs["process.executable.name"] == "workload"
            assert "hw.id" not in first_attrs  # a uprobe does not see the device

            # Per pod: the sum over its processes.
            assert _launches(points, POD_LAUNCHES, k8s__pod__uid=pod.uid) == (1510, 5)
            assert _value(points, POD_ALLOCATED, k8s__pod__uid=pod.uid) == \
                (1 << 20) + 8192 + 512
            assert _value(points, POD_SYNC, k8s__pod__uid=pod.uid) == pytest.approx(sync)

            # One process exits: its series go, the pod's counters keep its calls, its memory
            # is released, and the shared libraries stay traced for the other.
            second.close()
            points = wait_export(store, lambda pts: not select(pts, LAUNCHES,
                                                          process__pid=second.pid),
                           "the exited process's series gone")
            assert _launches(points, POD_LAUNCHES, k8s__pod__uid=pod.uid) == (1510, 5)
            assert _value(points, POD_ALLOCATED, k8s__pod__uid=pod.uid) == 1 << 20
            assert _value(points, LIBRARIES) == 2

            # The last process exits: the probes are detached, the pod's totals stay.
            first.close()
            points = wait_export(store, lambda pts: _value(pts, LIBRARIES) == 0, "probes detached")
            assert _launches(points, POD_LAUNCHES, k8s__pod__uid=pod.uid) == (1510, 5)
            assert _value(points, POD_ALLOCATED, k8s__pod__uid=pod.uid) == 0
            log = agent.log()
            assert "stopped tracing" in log
            # Attribution took its process exec/exit events from the tracepoints.
            assert "process exec/exit events (eBPF sched tracepoints)" in log
            assert "netlink proc connector" not in log
        finally:
            agent.close()


@pytest.mark.usefixtures("bpf_object")
def test_a_container_with_its_own_copy_in_another_mount_namespace(
    node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver,
    tmp_path: Path,
) -> None:
    reason = can_unshare_mount()
    if reason is not None:
        pytest.skip(reason)
    store = otlp_grpc_receiver.store
    with CudaWorkload() as host, \
            CudaWorkload(mount_namespace=True, library_dir=tmp_path / "private") as contained:
        maps = Path(f"/proc/{contained.pid}/maps").read_text()
        private = next(line.split()[-1] for line in maps.splitlines()
                       if line.endswith("libcudart.so.12"))
        assert not Path(private).exists()  # the file exists only in its mount namespace
        _on_gpu(node, host.pid)
        _on_gpu(node, contained.pid, device=1)
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             _config(tmp_path, None))
        try:
            points = wait_export(store, lambda pts: len(select(
                pts, LAUNCHES, gpu__cuda__launch__type="kernel")) == 2, "both traced")
            assert _value(points, LIBRARIES) == 4  # two copies of each library
            contained.launch(300)
            contained.malloc(65536)
            host.launch(7)
            points = wait_export(store, lambda pts: _launches(
                pts, process__pid=contained.pid)[0] == 300, "the contained calls counted")
            assert _launches(points, process__pid=host.pid) == (7, 0)
            assert _value(points, ALLOCATED, process__pid=contained.pid) == 65536
            # SIGTERM with four libraries traced: a clean exit within the shutdown budget
            # (the uprobes are detached in the background or by the kernel at exit).
            agent.terminate(timeout=60)
            assert agent.process.returncode == 0
            assert "shutdown took longer" not in agent.log()
            assert "run summary" in agent.log()
        finally:
            agent.close()


@pytest.mark.usefixtures("bpf_object")
def test_the_documented_capabilities_are_enough(
    node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    # Root with only CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN (creating uprobes, Linux 6.17+) and
    # CAP_SYS_PTRACE (opening /proc/PID/root of other containers' processes): the chart's set
    # with the plugin on. It traces a process whose library exists only in its own mount
    # namespace.
    reason = can_unshare_mount()
    if reason is not None:
        pytest.skip(reason)
    caps = "+bpf,+perfmon,+sys_admin,+sys_ptrace"
    only = ("setpriv", f"--bounding-set=-all,{caps}", f"--inh-caps=-all,{caps}", "--")
    with CudaWorkload(mount_namespace=True, library_dir=tmp_path / "private") as contained:
        _on_gpu(node, contained.pid)
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             _config(tmp_path, None), wrapper=only)
        try:
            wait_export(otlp_grpc_receiver.store, lambda pts: select(pts, LAUNCHES),
                  "the process traced")
            contained.launch(42)
            contained.graph(2)
            wait_export(otlp_grpc_receiver.store,
                  lambda pts: _launches(pts, process__pid=contained.pid) == (42, 2),
                  "its calls counted")
            status = Path(f"/proc/{agent.process.pid}/status").read_text()
            effective = next(line for line in status.splitlines() if line.startswith("CapEff"))
            assert int(effective.split()[1], 16) == (1 << 38) | (1 << 39) | (1 << 21) | (1 << 19)
        finally:
            agent.close()


def test_unsupported_gives_one_reason_and_the_agent_runs_on(
    node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere" / "cuda_activity.bpf.o"
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                         _config(tmp_path, None, object_path=str(missing)))
    try:
        points = wait_export(otlp_grpc_receiver.store,
                       lambda pts: select(pts, "hw.gpu.utilization"), "device metrics")
        assert not select(points, LIBRARIES)
        reasons = [line for line in agent.log().splitlines() if "eBPF plugin off" in line]
        assert len(reasons) == 1
        assert "is not built" in reasons[0] and str(missing) in reasons[0]
    finally:
        agent.close()


@pytest.mark.usefixtures("bpf_object")
@pytest.mark.parametrize("without", ["bpf,-perfmon,-sys_admin", "sys_admin"])
def test_without_capabilities_the_reason_names_them(
    node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path, without: str,
) -> None:
    # Root without what loading needs, or without what creating uprobes needs: a pod that was
    # not given them. Either way one line says which, and the agent exports on.
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                         _config(tmp_path, None), wrapper=(
                             "setpriv", f"--bounding-set=-{without}", f"--inh-caps=-{without}",
                             "--"))
    try:
        wait_export(otlp_grpc_receiver.store, lambda pts: select(pts, "hw.gpu.utilization"),
              "device metrics")
        log = agent.log()
        if without == "sys_admin" and "eBPF plugin loaded" in log:
            pytest.skip("this kernel lets CAP_PERFMON create uprobes (before Linux 6.17)")
        reasons = [line for line in log.splitlines() if "eBPF plugin off" in line]
        assert len(reasons) == 1
        assert "CAP_BPF and CAP_PERFMON, CAP_SYS_ADMIN (for uprobes)" in reasons[0]
    finally:
        agent.close()


@pytest.mark.usefixtures("bpf_object")
def test_the_tracepoints_are_a_process_event_source_for_the_resolver() -> None:
    execs: list[int] = []
    exits: list[int] = []

    async def scenario() -> int:
        plugin = open_plugin(EbpfSettings(interval=0.1), dict, lambda samples: None)
        assert plugin is not None
        events = plugin.process_events(ProcessCallbacks(
            execs.append, exits.append, lambda: None, lambda pid: None))
        assert events.start(asyncio.get_running_loop())
        task = asyncio.create_task(plugin.run())
        try:
            child = await asyncio.create_subprocess_exec("true")
            await child.wait()
            for _ in range(100):
                if child.pid in execs and child.pid in exits:
                    break
                await asyncio.sleep(0.05)
            return child.pid
        finally:
            events.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            plugin.close()

    pid = asyncio.run(scenario())
    assert pid in execs
    assert pid in exits


@pytest.mark.usefixtures("bpf_object")
def test_the_tracepoints_send_only_the_watched_processes() -> None:
    """The resolver's PIDs go into a map the tracepoints check in the kernel: the exec/exit of
    a process not in it never reaches the ring buffer, the watched one's exit does."""
    execs: list[int] = []
    exits: list[int] = []

    async def scenario() -> tuple[int, list[int]]:
        plugin = open_plugin(EbpfSettings(interval=0.1), dict, lambda samples: None)
        assert plugin is not None
        events = plugin.process_events(ProcessCallbacks(
            execs.append, exits.append, lambda: None, lambda pid: None))
        watched = await asyncio.create_subprocess_exec("sleep", "60")
        events.watch({watched.pid})
        assert events.start(asyncio.get_running_loop())
        task = asyncio.create_task(plugin.run())
        try:
            churn = []
            for _ in range(10):
                child = await asyncio.create_subprocess_exec("true")
                await child.wait()
                churn.append(child.pid)
            watched.kill()
            await watched.wait()
            for _ in range(100):
                if watched.pid in exits:
                    break
                await asyncio.sleep(0.05)
            return watched.pid, churn
        finally:
            events.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            plugin.close()

    pid, churn = asyncio.run(scenario())
    assert pid in exits
    # The churn ended before the watched process was killed: its events would be in by now.
    assert not set(churn) & {*execs, *exits}


@pytest.mark.usefixtures("bpf_object")
def test_the_real_cuda_runtime_has_the_functions_we_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    real = runtime_library()
    if real is None:
        pytest.skip("no CUDA toolkit runtime (libcudart) on this machine")
    device = real.stat().st_dev
    library = MappedLibrary(LibraryFile(f"{os.major(device):02x}:{os.minor(device):02x}",
                                        real.stat().st_ino), LibraryKind.RUNTIME, real)
    tracer = Tracer(compile_bpf.OBJECT, 1024, lambda record: None)
    probes = ProbeSet(tracer)
    try:
        with caplog.at_level(logging.INFO, logger="gpu_otel_agent.plugins.ebpf.uprobes"):
            probes.sync({os.getpid(): (library,)})
        assert probes.libraries == 1
        (line,) = [r.getMessage() for r in caplog.records if "tracing" in r.getMessage()]
        attached = int(line.split("libcudart, ")[1].split(" probes")[0])
        # Every launch, allocation, free and sync entry point of a current runtime is there.
        assert attached == len(RUNTIME_PROBES), line
    finally:
        probes.close()
        tracer.close()
