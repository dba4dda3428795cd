"""The AMD backend: real ``amdsmi`` on the simulated libamd_smi.so, values at a real receiver."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.model.metrics import DEVICE_METRICS, PROCESS_METRICS
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.exports import assert_event_identity, select, wait_export
from tests.integration.harness import SCENARIOS, AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
FAST = ["--interval", "0.2", "--export-interval", "0.3"]
MI300X_UUID = "74a1e2b4-0000-1000-8031-c2d5a8e1f001"
MI210_UUID = "740f9c0d-0000-1000-8022-a1b2c3d4e002"


@pytest.fixture
def mixed_node(tmp_path: Path) -> Iterator[SimulatedNode]:
    """One H100 and two AMD GPUs in one scenario (scenario indices 0, 1, 2)."""
    scenario = write_scenario(tmp_path, {
        "devices": [
            h100(0, uuid=UUIDS[0]),
            {"vendor": "amd", "model": "AMD Instinct MI300X", "uuid": MI300X_UUID,
             "pci_bus_id": "0000:0c:00.0", "utilization_gpu": 10},
            {"vendor": "amd", "model": "AMD Instinct MI210", "uuid": MI210_UUID,
             "pci_bus_id": "0000:2c:00.0", "fan_percent": 40, "utilization_mm": 12,
             # No metrics table here: every value comes from the individual amdsmi calls.
             "unsupported": ["amdsmi_get_gpu_metrics_info"]},
        ],
    })
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        yield node


def _latest(store: Store, metric: str, uuid: str, **attrs: object) -> float | int:
    wanted = {"hw.id": uuid, **{k.replace("__", "."): v for k, v in attrs.items()}}
    point = store.wait_for(lambda s: s.latest(metric, wanted), timeout=20, what=metric)
    return point.value


def test_amd_values_arrive_under_the_shared_names_next_to_nvidia(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    mixed_node.command({"op": "set", "device": 1, "values": {
        "utilization_gpu": 42, "utilization_memory": 17, "memory_used_mib": 5000,
        "hotspot_temperature_c": 71, "temperature_c": 55, "memory_temperature_c": 66,
        "power_w": 612.5, "gfx_clock_mhz": 1900, "memory_clock_mhz": 1300,
        "power_limit_w": 700, "ecc_correctable": 3, "pcie_replay_counter": 9,
        "throttle_ppt": 1}})
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {slow: {interval: 0.3}}\n", encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, mixed_node.env,
                         [*FAST, "--config", str(config)])
    try:
        store = otlp_grpc_receiver.store
        assert store.wait_for(
            lambda s: (p := s.latest("hw.gpu.utilization", {"hw.id": MI300X_UUID,
                                                            "hw.gpu.task": "general"}))
            and p.value == pytest.approx(0.42) and p,
            timeout=20, what="gfx activity 0.42 on the MI300X",
        )
        point = store.latest("hw.gpu.utilization", {"hw.id": MI300X_UUID})
        assert point is not None and point.unit == "1" and point.kind == "gauge"
        assert point.attributes["hw.vendor"] == "AMD"
        assert "hw.type" not in point.attributes  # hw.gpu.* list none (hw.power/status do)
        assert point.attributes["hw.model"] == "AMD Instinct MI300X"
        assert point.attributes["gpu.index"] == 0  # amdsmi's own enumeration
        assert point.attributes["gpu.pci.bus_id"] == "0000:0c:00.0"
        # Each device names its own driver (not one comma-joined value on the resource).
        assert point.attributes["hw.driver_version"] == "6.10.5"
        assert "gpu.driver.version" not in point.resource
        nvidia = store.latest("hw.gpu.utilization", {"hw.vendor": "NVIDIA"})
        assert nvidia is not None and nvidia.attributes["hw.driver_version"] == "580.95.05"

        u = MI300X_UUID
        assert _latest(store, "gpu.memory.controller.utilization", u) == pytest.approx(0.17)
        # The conventions' quantity: memory used over memory there is (not the UMC's busy time).
        assert _latest(store, "hw.gpu.memory.utilization", u) == pytest.approx(5000 / 196592)
        assert _latest(store, "hw.gpu.memory.usage", u) == 5000 * MIB  # MB -> By
        assert _latest(store, "hw.gpu.memory.limit", u) == 196592 * MIB
        assert _latest(store, "hw.temperature", u, hw__sensor_location="gpu") == 71  # hotspot
        assert _latest(store, "hw.temperature", u, hw__sensor_location="edge") == 55
        assert _latest(store, "hw.temperature", u, hw__sensor_location="memory") == 66
        assert _latest(store, "hw.power", u) == pytest.approx(612, abs=1)  # whole watts
        assert _latest(store, "gpu.clock.frequency", u, gpu__clock__domain="graphics") == 1900e6
        assert _latest(store, "gpu.clock.frequency", u, gpu__clock__domain="memory") == 1300e6
        assert _latest(store, "gpu.power.limit", u) == pytest.approx(700)  # uW -> W
        assert _latest(store, "hw.errors", u, error__type="corrected") == 3
        assert _latest(store, "gpu.pcie.replay", u) == 9
        assert _latest(store, "gpu.clock.throttle", u,
                       gpu__clock__throttle__reason="ppt_power") == 1
        assert _latest(store, "gpu.clock.throttle", u,
                       gpu__clock__throttle__reason="hbm_thermal") == 0
        energy = store.wait_for(
            lambda s: len(pts := s.points("hw.energy", {"hw.id": u})) >= 3 and pts,
            timeout=20, what="three AMD energy points",
        )
        assert energy[0].kind == "sum" and energy[0].monotonic and energy[0].unit == "J"
        assert energy[-1].value > energy[0].value > 0
        xgmi = store.wait_for(
            lambda s: len(pts := s.points("gpu.xgmi.io", {"hw.id": u,
                                                          "network.io.direction": "receive"}))
            >= 2 and pts, timeout=20, what="XGMI counter",
        )
        assert xgmi[0].unit == "By" and xgmi[-1].value > xgmi[0].value
        # The fan is a component of its own under its GPU (the conventions' hw.fan.*).
        fan = store.latest("hw.fan.speed_ratio", {"hw.parent": MI210_UUID})
        assert fan is not None and fan.value == pytest.approx(102 / 255)
        assert fan.attributes["hw.id"] == f"{MI210_UUID}/fan0"
        # VCN is the multimedia engine, not the conventions' decoder task.
        assert _latest(store, "gpu.multimedia.utilization", MI210_UUID) == pytest.approx(0.12)
        assert not store.points("hw.gpu.utilization", {"hw.gpu.task": "decoder",
                                                       "hw.vendor": "AMD"})
        # The NVIDIA GPU of the same node is sampled as before, under the same names.
        assert _latest(store, "hw.gpu.utilization", UUIDS[0], hw__gpu__task="general") == (
            pytest.approx(0.5))
        status = {p.attributes["hw.state"]: p.value
                  for p in store.points("hw.status", {"hw.id": u})[-3:]}
        assert status == {"ok": 1, "degraded": 0, "failed": 0}

        # What the catalog (and so docs/metrics.md) says AMD provides is what arrives.
        def amd_names(s: Store) -> set[str]:
            # By device id: hw.power, hw.temperature and the fan carry no hw.vendor (the
            # conventions' model lists none for them), hw.status does.
            amd = {p.attributes["hw.id"] for p in s.points("hw.status", {"hw.vendor": "AMD"})}
            return {p.metric for p in s.points() if not p.metric.startswith("gpu_agent.")
                    and (p.attributes.get("hw.id") in amd or p.attributes.get("hw.parent") in amd)}

        promised = {spec.name for spec in DEVICE_METRICS if "amd" in spec.vendors}
        store.wait_for(lambda s: amd_names(s) >= promised, timeout=20,
                       what=f"every AMD metric: missing {promised - amd_names(store)}")
        allowed = {spec.name for spec in (*DEVICE_METRICS, *PROCESS_METRICS)
                   if "amd" in spec.vendors}
        assert amd_names(store) <= allowed
        # The MI300X is read from its metrics table: the individual calls it serves were made
        # once, at probe; the MI210 without a table uses them every cycle.
        per_device = mixed_node.stats()["per_device"]
        assert isinstance(per_device, dict)
        activity = per_device["amdsmi_get_gpu_activity"]
        assert activity["1"] == 1 and activity["2"] >= 3
        assert per_device["amdsmi_get_gpu_metrics_info"]["1"] >= 3
        assert "AMD SMI" not in agent.log() and "Traceback" not in agent.log()
    finally:
        agent.close()


def test_without_libamd_smi_the_agent_runs_nvidia_only_and_says_so_once(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    scenario = write_scenario(tmp_path, {"devices": [h100(0, uuid=UUIDS[0])]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        assert "GPU_SIM_AMD_NODE" not in node.env
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
        try:
            store = otlp_grpc_receiver.store
            store.wait_for(lambda s: len(s.points("hw.power", {"hw.id": UUIDS[0]})) >= 3,
                           timeout=20, what="NVIDIA power")
            log = agent.log()
            skipped = [line for line in log.splitlines() if "amd" in line.lower()]
            assert len(skipped) == 1, log
            assert "backend amd skipped" in skipped[0]
            assert "libamd_smi.so not found" in skipped[0]
            assert "Could not load" not in log  # the wrapper's own prints stay out
            assert not store.points(None, {"hw.vendor": "AMD"})
        finally:
            agent.close()


def _state(store: Store, uuid: str, since: float = 0.0) -> str | None:
    points = [p for p in store.points("hw.status", {"hw.id": uuid})
              if p.value == 1 and p.received_at > since]
    return str(points[-1].attributes["hw.state"]) if points else None


def _reprobing_agent(node: SimulatedNode, receiver: OtlpGrpcReceiver,
                     tmp_path: Path) -> AgentProcess:
    """An agent that probes a lost GPU again every half second."""
    config = tmp_path / "agent.yaml"
    config.write_text("lost_reprobe_interval: 0.5\n", encoding="utf-8")
    return AgentProcess(tmp_path, receiver.endpoint, node.env, [*FAST, "--config", str(config)])


def test_amd_gpu_reset_fails_it_and_it_comes_back(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    agent = _reprobing_agent(mixed_node, otlp_grpc_receiver, tmp_path)
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _state(s, MI210_UUID) == "ok", timeout=20)
        mixed_node.command({"op": "reset", "device": 2, "ms": 2500})
        reset_at = time.time()
        store.wait_for(lambda s: _state(s, MI210_UUID, reset_at) == "failed", timeout=10,
                       what="MI210 failed during its reset")
        assert _state(store, MI300X_UUID, reset_at) == "ok"  # the other AMD GPU carries on
        store.wait_for(lambda s: _state(s, MI210_UUID, reset_at + 2.5) == "ok", timeout=15,
                       what="MI210 back after its reset")
    finally:
        agent.close()


def test_an_amd_gpu_off_the_bus_is_lost_from_sampling(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    """Off the bus, amdsmi still knows the handle: no call answers NOT_FOUND. The VRAM-usage
    ioctl (which no reset refuses) answering DRM_ERROR is what tells the agent the GPU is
    gone; before, every call's NOT_SUPPORTED cost one cycle and the GPU was never lost."""
    agent = _reprobing_agent(mixed_node, otlp_grpc_receiver, tmp_path)
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _state(s, MI210_UUID) == "ok", timeout=20)
        mixed_node.command({"op": "lost", "device": 2})
        lost_at = time.time()
        store.wait_for(lambda s: s.logs("gpu.lost", {"hw.id": MI210_UUID}), timeout=20,
                       what="gpu.lost for the MI210 off the bus")
        store.wait_for(lambda s: _state(s, MI300X_UUID, lost_at) == "ok", timeout=20,
                       what="the other AMD GPU carries on")
        mixed_node.command({"op": "recover", "device": 2})
        back_at = time.time()
        store.wait_for(lambda s: _state(s, MI210_UUID, back_at) == "ok", timeout=20,
                       what="MI210 back on the bus")
        assert "Traceback" not in agent.log()
    finally:
        agent.close()


def test_simulate_flag_serves_the_mixed_example_in_one_process(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    scenario = SCENARIOS / "h100-mi300x-mixed.yaml"
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, None,
                         ["--simulate", str(scenario), *FAST])
    try:
        store = otlp_grpc_receiver.store

        def vendors(s: Store) -> dict[str, set[object]]:
            seen: dict[str, set[object]] = {}
            for p in s.points("hw.status"):  # hw.power lists no hw.vendor; hw.status does
                seen.setdefault(str(p.attributes["hw.vendor"]), set()).add(p.attributes["hw.id"])
            return seen

        store.wait_for(lambda s: {k: len(v) for k, v in vendors(s).items()}
                       == {"NVIDIA": 2, "AMD": 2}, timeout=30, what="2 NVIDIA + 2 AMD GPUs")
        # MI300X has no edge sensor in the example: absent, never 0.
        amd = vendors(store)["AMD"]
        located = {(p.attributes["hw.id"], p.attributes["hw.sensor_location"])
                   for p in store.points("hw.temperature")}
        assert {(u, "gpu") for u in amd} <= located
        assert not {(u, "edge") for u in amd} & located
        agent.shutdown()
    finally:
        agent.close()


def test_a_process_on_an_amd_gpu_is_attributed_to_its_pod_like_an_nvidia_one(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
    from tests.integration.cgroups import cgroups, v2_root
    from tests.integration.exports import select, wait_export
    from tests.integration.test_attribution import _config
    from tests.receivers.kubelet import FakeKubelet

    v2 = v2_root()
    if v2 is None:
        pytest.skip("no cgroup v2 hierarchy on this machine")
    with cgroups() as groups, FakeKubelet(tmp_path / "kubelet" / "kubelet.sock") as kubelet:
        amd_pod = groups.pod(v2, "rocm-trainer", "guaranteed", "systemd")
        nv_pod = groups.pod(v2, "cuda-trainer", "burstable", "cgroupfs")
        amd_pid = groups.spawn(amd_pod.cgroup)
        nv_pid = groups.spawn(nv_pod.cgroup)
        kubelet.set_pods([
            # AMD's device plugin allocates GPUs by PCI bus id.
            PodAllocation(amd_pod.namespace, amd_pod.name, (ContainerAllocation(
                "main", (ContainerDevices("amd.com/gpu", ("0000:0c:00.0",)),)),)),
            PodAllocation(nv_pod.namespace, nv_pod.name, (ContainerAllocation(
                "main", (ContainerDevices("nvidia.com/gpu", (UUIDS[0],)),)),)),
        ])
        for device, pid, memory, util in ((1, amd_pid, 3000, 40), (0, nv_pid, 2000, 30)):
            mixed_node.command({"op": "proc_add", "device": device, "pid": pid,
                                "used_memory_mib": memory, "sm_util": util})
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, mixed_node.env,
                             _config(tmp_path, kubelet.socket_path))
        try:
            store = otlp_grpc_receiver.store

            def complete(points: list[object]) -> bool:
                # The AMD process is a HIP one: its activity is CU occupancy, not engine time.
                return bool(select(points, "gpu.container.utilization",  # type: ignore[arg-type]
                                   k8s__pod__name=nv_pod.name, hw__gpu__task="general")
                            and select(points,  # type: ignore[arg-type]
                                       "gpu.process.compute_unit.occupancy",
                                       k8s__pod__name=amd_pod.name))

            try:
                points = wait_export(store, complete, "both pods named, with utilization")
            except AssertionError:
                print(agent.log()[-3000:])
                raise
            for pod, pid, uuid, memory, util in (
                (amd_pod, amd_pid, MI300X_UUID, 3000, 0.40),
                (nv_pod, nv_pid, UUIDS[0], 2000, 0.30),
            ):
                (process,) = select(points, "gpu.process.memory.usage", process__pid=pid)
                assert process.value == memory * MIB
                assert process.attributes["hw.id"] == uuid
                assert process.attributes["process.executable.name"] == "sleep"
                assert process.attributes["k8s.pod.uid"] == pod.uid
                assert process.attributes["container.id"] == pod.container_id
                assert process.attributes["k8s.pod.name"] == pod.name
                assert process.attributes["k8s.container.name"] == "main"
                busy = select(points, "gpu.process.utilization", process__pid=pid,
                              hw__gpu__task="general")
                if uuid == MI300X_UUID:  # fdinfo shows 0 ns for HIP work: absent, never 0 %
                    assert busy == []
                    (cus,) = select(points, "gpu.process.compute_unit.occupancy",
                                    process__pid=pid)
                    # rocm_smi's integer percentage of the CUs (ROCm 7.0)
                    assert cus.value == pytest.approx(round(util * 304) * 100 // 304 / 100)
                    assert cus.attributes["k8s.pod.name"] == pod.name
                else:
                    assert len(busy) == 1 and busy[0].value == pytest.approx(util, abs=0.1)
                (total,) = select(points, "gpu.container.memory.usage", k8s__pod__uid=pod.uid)
                assert total.value == memory * MIB and total.attributes["hw.id"] == uuid
            # The whole MI300X is allocated to the AMD pod: its limit is the GPU's memory.
            (limit,) = select(points, "gpu.container.memory.limit",
                               k8s__pod__uid=amd_pod.uid)
            assert limit.value == 196592 * MIB
            assert select(points, "gpu.process.memory.usage",
                           process__pid=amd_pid)[0].attributes["hw.vendor"] == "AMD"
        finally:
            agent.close()


def test_amd_notifications_arrive_as_health_events(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    sleeper = subprocess.Popen(["sleep", "600"])
    config = tmp_path / "agent.yaml"
    config.write_text("lost_reprobe_interval: 30\ngroups: {slow: {interval: 0.3}}\n",
                      encoding="utf-8")
    mixed_node.command({"op": "proc_add", "device": 1, "pid": sleeper.pid,
                        "used_memory_mib": 100, "sm_util": 10})
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, mixed_node.env,
                         [*FAST, "--config", str(config)])
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _state(s, MI300X_UUID) == "ok", timeout=20)
        store.wait_for(lambda s: s.points("gpu.process.memory.usage",
                                          {"process.pid": sleeper.pid}), timeout=20)
        # A VM fault has no shared meaning: it arrives under AMD's own name, with the message.
        sent = time.time()
        mixed_node.command({"op": "event", "device": 1, "type": "vm_fault",
                            "message": "VM fault at 0x7f0000001000 (pasid 32771)"})
        fault = store.wait_for(lambda s: s.logs("gpu.amd.vm_fault", {"hw.id": MI300X_UUID}),
                               timeout=60, what="gpu.amd.vm_fault")[0]
        assert fault.received_at >= sent
        attrs = fault.attributes
        assert attrs["event.name"] == "gpu.amd.vm_fault" and fault.event_name == attrs[
            "event.name"]
        assert attrs["hw.vendor"] == "AMD" and attrs["gpu.event.source"] == "amdsmi"
        assert attrs["hw.model"] == "AMD Instinct MI300X"
        assert "0x7f0000001000" in fault.body
        assert fault.severity_text == "ERROR"
        assert attrs["process.pid"] == sleeper.pid  # who was on the GPU at that moment
        # A thermal-throttle notification is the shared gpu.throttle.
        mixed_node.command({"op": "event", "device": 1, "type": "thermal_throttle"})
        throttle = store.wait_for(
            lambda s: s.logs("gpu.throttle", {"hw.id": MI300X_UUID,
                                              "gpu.event.source": "amdsmi"}),
            timeout=10, what="gpu.throttle from amdsmi")[0]
        assert throttle.attributes["gpu.throttle.state"] == "start"
        # Routine KFD traffic is not subscribed: no event for a queue eviction.
        mixed_node.command({"op": "event", "device": 1, "type": "queue_eviction"})
        # A polled AMD throttle reason starts and ends like NVIDIA's.
        mixed_node.command({"op": "set", "device": 1, "values": {"throttle_hbm_thermal": 1}})
        store.wait_for(lambda s: s.logs("gpu.throttle", {
            "hw.id": MI300X_UUID, "gpu.clock.throttle.reason": "hbm_thermal",
            "gpu.throttle.state": "start"}), timeout=10, what="hbm_thermal start")
        # A GPU reset: gpu.lost at the pre-reset notification, gpu.recovered after the
        # post-reset one, long before the sampler's 30 s re-probe would have noticed.
        mixed_node.command({"op": "reset", "device": 2, "ms": 1500})
        lost = store.wait_for(lambda s: s.logs("gpu.lost", {"hw.id": MI210_UUID}),
                              timeout=10, what="gpu.lost on reset")
        assert "reset" in lost[0].body
        recovered = store.wait_for(lambda s: s.logs("gpu.recovered", {"hw.id": MI210_UUID}),
                                   timeout=10, what="gpu.recovered after reset")
        assert recovered[0].time_unix_nano > lost[0].time_unix_nano
        # Its readings resume at once, not at the sampler's 30 s re-probe.
        back = time.time()
        store.wait_for(lambda s: [p for p in s.points("hw.power", {"hw.id": MI210_UUID})
                                  if p.received_at > back + 0.5], timeout=8,
                       what="MI210 readings right after its reset")
        assert len(store.logs("gpu.lost", {"hw.id": MI210_UUID})) == 1  # seen twice, sent once
        assert not store.logs("gpu.amd.queue_eviction")
        assert not store.logs(None, {"hw.id": UUIDS[0], "event.name": "gpu.lost"})
        # AMD's events carry their identity like NVIDIA's.
        kinds = {what[0] for what in assert_event_identity(store.logs()).values()}
        assert kinds >= {"gpu.amd.vm_fault", "gpu.throttle", "gpu.lost", "gpu.recovered"}
    finally:
        agent.close()
        sleeper.kill()
        sleeper.wait()


def test_with_attribution_off_amd_events_still_name_the_processes_on_the_gpu(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(2)]
    config = tmp_path / "agent.yaml"
    config.write_text("attribution: {enabled: false}\n", encoding="utf-8")
    mixed_node.command({"op": "proc_add", "device": 0, "pid": sleepers[0].pid,
                        "used_memory_mib": 100})
    mixed_node.command({"op": "proc_add", "device": 1, "pid": sleepers[1].pid,
                        "used_memory_mib": 100})
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, mixed_node.env,
                         [*FAST, "--config", str(config)])
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _state(s, MI300X_UUID) == "ok" and _state(s, UUIDS[0]) == "ok",
                       timeout=20)
        assert not store.points("gpu.process.memory.usage")  # attribution is off
        mixed_node.command({"op": "event", "device": 1, "type": "vm_fault", "message": "x"})
        mixed_node.command({"op": "xid", "device": 0, "code": 13})
        fault = store.wait_for(lambda s: s.logs("gpu.amd.vm_fault"), timeout=10)[0]
        xid = store.wait_for(lambda s: s.logs("gpu.xid"), timeout=10)[0]
        assert fault.attributes["process.pid"] == sleepers[1].pid
        assert fault.attributes["process.executable.name"] == "sleep"
        assert xid.attributes["process.pid"] == sleepers[0].pid  # NVIDIA's own lookup
    finally:
        agent.close()
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_a_hung_amd_call_is_named_in_gpu_unresponsive(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("call_timeout: 0.5\n", encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, mixed_node.env,
                         [*FAST, "--config", str(config)])
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: _state(s, MI300X_UUID) == "ok", timeout=20)
        mixed_node.command({"op": "hang", "device": 1, "ms": 2500})
        hung = store.wait_for(lambda s: s.logs("gpu.unresponsive", {"hw.id": MI300X_UUID}),
                              timeout=10, what="gpu.unresponsive on the MI300X")[0]
        assert str(hung.attributes["gpu.call"]).startswith("amdsmi_get_")
        assert hung.attributes["hw.vendor"] == "AMD"
        # The other GPUs, AMD and NVIDIA, are sampled on while it hangs.
        since = time.time()
        for uuid in (MI210_UUID, UUIDS[0]):
            store.wait_for(lambda s, u=uuid: [p for p in s.points("hw.power", {"hw.id": u})
                                              if p.received_at > since + 0.5], timeout=5)
        store.wait_for(lambda s: s.logs("gpu.recovered", {"hw.id": MI300X_UUID}), timeout=15,
                       what="the MI300X answers again")
    finally:
        agent.close()


def test_each_metric_has_one_value_type_doubles_for_measurements(
    mixed_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    """NVML serves temperatures as unsigned ints and amdsmi watts and degrees as ints: a
    metric's points have one value type whatever the device (as_double for watts, degrees,
    joules and seconds: DOUBLE_UNITS), at a real receiver, for every device of the node."""
    from gpu_otel_agent.model.metrics import DOUBLE_UNITS

    mixed_node.command({"op": "set", "device": 1, "values": {"power_w": 612,
                                                             "temperature_c": 55}})
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, mixed_node.env, FAST)
    try:
        wanted = ("hw.power", "hw.temperature", "hw.temperature.limit")
        uuids = {UUIDS[0], MI300X_UUID, MI210_UUID}

        def complete(points: list[Point]) -> bool:
            # hw.temperature.limit where the device serves one (not every AMD part does)
            return all({p.attributes.get("hw.id") for p in points if p.metric == m} >= uuids
                       for m in wanted[:2]) and bool(select(points, wanted[2]))

        points = wait_export(otlp_grpc_receiver.store, complete, "power and temperatures",
                             timeout=30)
    finally:
        agent.close()
    typed = [p for p in points if p.unit in DOUBLE_UNITS]
    assert {p.metric for p in typed} >= set(wanted)
    ints = sorted({(p.metric, str(p.attributes.get("hw.id"))) for p in typed
                   if not isinstance(p.value, float)})
    assert ints == []
    # And every other metric has one value type on every device of the node too.
    types: dict[str, set[str]] = {}
    for p in points:
        types.setdefault(p.metric, set()).add(type(p.value).__name__)
    assert {m: t for m, t in types.items() if len(t) > 1} == {}
