"""MI300X partitions: the simulated node serves a CPX/NPS4 MI300X as amdsmi does on the real part
(eight processors on one socket, one UUID among them on the libraries still deployed, socket
power on every one of them), and the agent exports it as a device tree: the physical GPU with
its socket power and energy counted once, and eight partitions with their own identity, VRAM
share, activity and processes.

The library side is read with the real ``amdsmi`` package in a client process; the agent's
output is read at a real OTLP receiver.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.integration.test_amd_fidelity import run_backend
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store
from tests.unit.simulator.simhelpers import client_env, write_scenario

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
FAST = ["--interval", "0.2", "--export-interval", "0.3"]
MI300X_MIB = 196592
SPX_UUID = "74a1e2b4-0000-1000-8031-c2d5a8e1f001"

SCENARIO = f"""
devices:
  - vendor: amd
    model: AMD Instinct MI300X
    pci_bus_id: "0000:0c:00.0"
    serial: "D3A51C2B17F0E6A9"
    partition: {{compute: CPX, memory: NPS4}}
    power_w: 612
    utilization_gpu: 35
    memory_used_mib: 3000
  - {{vendor: amd, model: AMD Instinct MI300X, uuid: {SPX_UUID}, pci_bus_id: "0000:2c:00.0",
     power_w: 400, utilization_gpu: 20}}
"""
CPX, SPX = 0, 1

# What the real amdsmi reports, read in a client process of the node (the independent view).
_LIBRARY = r"""
import ctypes, json
import amdsmi as A
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
def maybe(fn, *args):
    try:
        return fn(*args)
    except A.AmdSmiLibraryException as error:
        return None
out = {"sockets": [], "processors": []}
for s in A.amdsmi_get_socket_handles():
    out["sockets"].append(A.amdsmi_get_socket_info(s))
for h in A.amdsmi_get_processor_handles():
    t = A.amdsmi_wrapper.amdsmi_gpu_metrics_t()
    A.amdsmi_wrapper.amdsmi_get_gpu_metrics_info(h, ctypes.byref(t))
    out["processors"].append({
        "bdf": A.amdsmi_get_gpu_device_bdf(h), "uuid": A.amdsmi_get_gpu_device_uuid(h),
        "compute": maybe(A.amdsmi_get_gpu_compute_partition, h),
        "memory": maybe(A.amdsmi_get_gpu_memory_partition, h),
        "partition_id": A.amdsmi_get_gpu_kfd_info(h)["current_partition_id"],
        "vram_total": A.amdsmi_get_gpu_vram_usage(h)["vram_total"],
        "vram_used": A.amdsmi_get_gpu_vram_usage(h)["vram_used"],
        "gfx_activity": A.amdsmi_get_gpu_activity(h)["gfx_activity"],
        "table_gfx": t.average_gfx_activity, "table_rev": t.common_header.content_revision,
        "xcp_busy": [list(t.xcp_stats[i].gfx_busy_inst) for i in range(t.num_partition)]
                    if t.num_partition != 0xFFFF else None,
        "power": A.amdsmi_get_power_info(h)["socket_power"],
        "pids": [p["pid"] for p in A.amdsmi_get_gpu_process_list(h)],
        "lib": A.amdsmi_get_lib_version(),
    })
print(json.dumps(out))
"""


def library_view(node: SimulatedNode) -> dict[str, Any]:
    import json

    proc = subprocess.run([sys.executable, "-c", _LIBRARY], env=client_env(node),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    with SimulatedNode.start(write_scenario(tmp_path, SCENARIO), state_dir=tmp_path / "s") as n:
        yield n


@pytest.fixture
def hip() -> Iterator[list[int]]:
    """Two processes standing in for HIP jobs (the node names them from /proc)."""
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(2)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def test_the_node_serves_cpx_as_amdsmi_reports_it(node: SimulatedNode, hip: list[int]) -> None:
    """Every partition's handle answers the socket's activity and the device's VRAM use; only
    XCP 0's v1.6 table tells the partitions apart (per-XCP busy); the modes answer on XCP 0."""
    node.command({"op": "proc_add", "device": CPX, "partition": 3, "pid": hip[0],
                  "used_memory_mib": 1000, "sm_util": 50})
    node.command({"op": "set", "device": CPX, "partition": 3,
                  "values": {"utilization_gpu": 91, "memory_used_mib": 9000}})
    lib = library_view(node)
    assert lib["sockets"] == ["0000:0C:00", "0000:2C:00"]  # one socket per physical GPU
    cpx = [p for p in lib["processors"] if p["bdf"].startswith("0000:0c:00.")]
    assert [p["bdf"] for p in cpx] == [f"0000:0c:00.{i}" for i in range(8)]
    assert [p["partition_id"] for p in cpx] == list(range(8))
    # ROCm 7.0 (the default): the modes only on XCP 0, "N/A" elsewhere (k8s-gpu-dra-driver#20).
    assert [p["compute"] for p in cpx] == ["CPX", *[None] * 7]
    assert [p["memory"] for p in cpx] == ["NPS4", *[None] * 7]
    assert cpx[0]["lib"]["major"] == 26
    # The library version modelled by default (ROCm <= 7.11) gives all eight one UUID.
    assert len({p["uuid"] for p in cpx}) == 1
    # ROCm 7.0: the whole device on XCP 0, the even share on the others (capture of 7.0.1)
    assert [p["vram_total"] for p in cpx] == [MI300X_MIB, *[MI300X_MIB // 8] * 7]
    socket_busy = (35 * 7 + 91) // 8  # the socket's: the mean over its XCCs
    assert {p["gfx_activity"] for p in cpx} == {p["table_gfx"] for p in cpx} == {socket_busy}
    assert {p["vram_used"] for p in cpx} == {3000 // 8 * 7 + 9000}  # the device's, everywhere
    assert {p["power"] for p in cpx} == {612}  # the socket's power, on every partition
    assert {p["table_rev"] for p in cpx} == {6}
    na32 = 0xFFFF_FFFF
    busy = cpx[0]["xcp_busy"]
    assert len(busy) == 8 and [b[0] for b in busy] == [35, 35, 35, 91, 35, 35, 35, 35]
    assert all(b[1:] == [na32] * 7 for b in busy)  # CPX: one XCC per partition
    assert [p["pids"] for p in cpx] == [[], [], [], [hip[0]], [], [], [], []]
    spx = [p for p in lib["processors"] if p["bdf"].startswith("0000:2c:00.")]
    assert len(spx) == 1 and spx[0]["compute"] == "SPX" and spx[0]["partition_id"] == 0
    assert spx[0]["xcp_busy"][0] == [20] * 8  # SPX: the one partition has all 8 XCCs


def test_an_older_library_reports_the_whole_vram_on_every_partition(tmp_path: Path) -> None:
    """ROCm 6.4 (ROCm/ROCm issue 4750): each partition shows the whole GPU's memory; the agent's
    partitions never add up to more than the socket."""
    text = "amd_rocm_version: '6.4'\n" + SCENARIO.replace("CPX, memory: NPS4", "DPX")
    with SimulatedNode.start(write_scenario(tmp_path, text), state_dir=tmp_path / "s") as node:
        lib = library_view(node)
        out = run_backend(node, """
            d = devs[0]
            d.probe()
            parts = d.partitions()
            for p in parts:
                p.probe()
            out = {"socket": metric(rd(d, "fast"), "hw.gpu.memory.limit"),
                   "used": metric(rd(d, "fast"), "hw.gpu.memory.usage"),
                   "parts": [metric(rd(p, "slow"), "hw.gpu.memory.limit") for p in parts],
                   "part_used": [metric(rd(p, "fast") + rd(p, "slow"), "hw.gpu.memory.usage")
                                 for p in parts],
                   "modes": [dict(p.identity.attributes()) for p in parts]}
        """)
    dpx = lib["processors"][:2]
    assert [p["vram_total"] for p in dpx] == [MI300X_MIB, MI300X_MIB]
    assert dpx[0]["lib"]["major"] == 25
    assert out["socket"] == [MI300X_MIB * MIB] and out["used"] == [3000 * MIB]
    assert out["parts"] == [[MI300X_MIB // 2 * MIB]] * 2
    assert out["part_used"] == [[], []]  # the device's use is the socket's, not a partition's
    # XCP 1 answers no modes on this library: it carries XCP 0's.
    assert [m["amd.partition.compute_mode"] for m in out["modes"]] == ["DPX", "DPX"]
    assert [m.get("amd.partition.memory_mode") for m in out["modes"]] == ["NPS1", "NPS1"]


@pytest.mark.parametrize(("case", "busy"), [
    ("one partition busy", [90, 0, 0, 0, 0, 0, 0, 0]),
    ("two that agree", [60, 60, 0, 0, 0, 0, 0, 0]),
    ("two that disagree", [80, 0, 0, 0, 0, 0, 20, 0]),
    ("none", [0] * 8),
])
def test_each_partition_reports_its_own_busy_and_the_socket_the_mean(
    tmp_path: Path, case: str, busy: list[int]
) -> None:
    """The lonely case: on a real CPX MI300X every handle answers the socket's activity, so a
    partition is reported busy only from its own XCC's busy (v1.6 per-XCP stats)."""
    entries = ", ".join(f"{{utilization_gpu: {b}}}" for b in busy)
    text = SCENARIO.replace("    utilization_gpu: 35\n", f"    partitions: [{entries}]\n")
    with SimulatedNode.start(write_scenario(tmp_path, text), state_dir=tmp_path / "s") as node:
        out = run_backend(node, """
            d = devs[0]
            d.probe()
            for p in d.partitions():
                p.probe()
            gfx = {"hw.gpu.task": "general"}
            out = {"socket": metric(rd(d, "fast"), "hw.gpu.utilization", **gfx),
                   "parts": [metric(rd(p, "fast"), "hw.gpu.utilization", **gfx)
                             for p in d.partitions()]}
        """)
    assert out["parts"] == [[pytest.approx(b / 100)] for b in busy], case
    assert out["socket"] == [pytest.approx(int(sum(busy) / 8 + 0.5) / 100)], case  # whole %


def test_a_v15_table_has_no_per_partition_busy_and_no_throttle_residency(tmp_path: Path) -> None:
    """Older MI300X firmware serves gpu_metrics v1.5: no per-XCP stats (absent on the
    partitions, never the socket's figure under their names) and no residency accumulators
    (no throttle reasons, violation status NOT_SUPPORTED)."""
    text = SCENARIO.replace("    power_w: 612\n", "    power_w: 612\n"
                            "    gpu_metrics_content_revision: 5\n    throttle_ppt: 1\n")
    with SimulatedNode.start(write_scenario(tmp_path, text), state_dir=tmp_path / "s") as node:
        out = run_backend(node, """
            import amdsmi as A
            d = devs[0]
            groups = d.probe()
            for p in d.partitions():
                p.probe()
            time.sleep(0.3)
            first = rd(d, "slow")
            time.sleep(0.3)
            gfx = {"hw.gpu.task": "general"}
            out = {"socket": metric(rd(d, "fast"), "hw.gpu.utilization", **gfx),
                   "parts": [metric(rd(p, "fast"), "hw.gpu.utilization") for p in d.partitions()],
                   "throttle": metric(first + rd(d, "slow"), "gpu.clock.throttle")}
            try:
                A.amdsmi_get_violation_status(d.handle)
                out["violation"] = "ok"
            except A.AmdSmiLibraryException as e:
                out["violation"] = e.get_error_code()
        """)
    assert out["socket"] == [pytest.approx(0.35)]
    assert out["parts"] == [[]] * 8
    assert out["throttle"] == []
    assert out["violation"] == 2


def test_a_vm_fault_on_a_partition_reaches_the_agent_under_that_partition(
    node: SimulatedNode
) -> None:
    """KFD raises a VM fault on the partition that faulted: every partition is subscribed; a
    GPU reset announced by several partitions is one event of the physical GPU."""
    out = run_backend(node, """
        import threading
        from gpu_otel_agent.backends.protocol import EventSourceOptions
        got, lock = [], threading.Lock()
        def emit(batch):
            with lock:
                got.extend(batch)
        (source,) = backend.event_sources(devs, EventSourceOptions())
        source.start(emit)
        time.sleep(0.5)
        send_node({"op": "event", "device": 0, "partition": 5, "type": "vm_fault",
                   "message": "VM fault at 0x1000"})
        for part in (2, 6):
            send_node({"op": "event", "device": 0, "partition": part, "type": "gpu_pre_reset"})
        deadline = time.time() + 30
        while time.time() < deadline:
            with lock:
                if len(got) >= 2:
                    break
            time.sleep(0.1)
        time.sleep(0.5)
        source.stop()
        out = {"events": [[e.uuid, e.kind, e.partition] for e in got],
               "xcp5": devs[0].partitions()[5].identity.uuid, "gpu": devs[0].identity.uuid}
    """)
    # Keyed by the physical GPU (what the health engine tracks), scoped to the partition.
    assert out["events"][0] == [out["gpu"], "vendor", out["xcp5"]]
    assert [e for e in out["events"] if e[1] != "vendor"] == [
        [out["gpu"], "gpu_reset_start", ""]]


def test_partitions_sharing_a_uuid_are_distinct_devices(node: SimulatedNode) -> None:
    """Keyed by UUID, the eight partitions would be one device (the old behaviour)."""
    lib = library_view(node)
    out = run_backend(node, """
        out = []
        for d in devs:
            out.append([d.identity.uuid, d.identity.parent_uuid])
            for p in getattr(d, "partitions", lambda: ())():
                out.append([p.identity.uuid, p.identity.parent_uuid])
    """)
    ids = [uuid for uuid, _ in out]
    assert len(ids) == len(set(ids)) == 1 + 8 + 1
    shared = lib["processors"][0]["uuid"]
    # The physical GPU keeps the UUID amdsmi gives the whole part; partitions hang off it.
    assert [parent for _, parent in out] == [None, *[shared] * 8, None]
    assert ids[0] == shared and ids[-1] == SPX_UUID


def test_the_gpus_processes_are_those_of_all_its_partitions(
    node: SimulatedNode, hip: list[int]
) -> None:
    """What a health event on the GPU names (workload lookup): every partition's processes."""
    for pid, number in zip(hip, (3, 6), strict=True):
        node.command({"op": "proc_add", "device": CPX, "partition": number, "pid": pid,
                      "used_memory_mib": 100, "sm_util": 10})
    out = run_backend(node, """
        lookup = backend.workload_lookup()
        d = devs[0]
        out = {"gpu": sorted(p.pid for p in lookup.processes_on(d.identity.uuid)),
               "xcp6": [p.pid for p in lookup.processes_on(d.partitions()[6].identity.uuid)],
               "xcp0": [p.pid for p in lookup.processes_on(d.partitions()[0].identity.uuid)]}
    """)
    assert out == {"gpu": sorted(hip), "xcp6": [hip[1]], "xcp0": []}


def _wait_latest(store: Store, metric: str, attrs: dict[str, object]) -> Any:
    return store.wait_for(lambda s: s.latest(metric, attrs), timeout=30, what=metric)


def test_cpx_exports_a_tree_with_socket_power_once(
    node: SimulatedNode, hip: list[int], otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    node.command({"op": "proc_add", "device": CPX, "partition": 3, "pid": hip[0],
                  "used_memory_mib": 1000, "sm_util": 50})
    node.command({"op": "proc_add", "device": CPX, "partition": 5, "pid": hip[1],
                  "used_memory_mib": 2000, "sm_util": 25})
    node.command({"op": "set", "device": CPX, "partition": 3,
                  "values": {"utilization_gpu": 70, "memory_used_mib": 9000}})
    parent = library_view(node)["processors"][0]["uuid"]
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
    try:
        store = otlp_grpc_receiver.store

        def partitions(s: Store) -> dict[int, Any]:
            found = {}
            for p in s.points("hw.gpu.memory.limit", {"hw.parent": parent}):
                found[int(p.attributes["amd.partition.id"])] = p
            return found

        found = store.wait_for(lambda s: len(got := partitions(s)) == 8 and got, timeout=30,
                               what="eight partitions")
        assert len({p.attributes["hw.id"] for p in found.values()}) == 8
        for number, point in found.items():
            a = point.attributes
            assert a["amd.partition.compute_mode"] == "CPX"
            assert a["amd.partition.memory_mode"] == "NPS4"
            assert a["gpu.index"] == 0 and a["gpu.pci.bus_id"] == f"0000:0c:00.{number}"
            assert point.value == MI300X_MIB // 8 * MIB
        # Activity: each partition's own XCC busy (v1.6 per-XCP stats); the socket's on the
        # physical GPU. VRAM use: the device's on the physical GPU, and (this library, ROCm 7.0:
        # amdsmi_get_gpu_memory_usage per partition) each partition's own, adding up to it.
        for number, busy in ((3, 0.70), (0, 0.35), (7, 0.35)):
            part = found[number].attributes["hw.id"]
            assert _wait_latest(store, "hw.gpu.utilization",
                                {"hw.id": part, "hw.gpu.task": "general"}).value == (
                pytest.approx(busy))
        gfx = {"hw.id": parent, "hw.gpu.task": "general"}
        assert _wait_latest(store, "hw.gpu.utilization", gfx).value == pytest.approx(
            round((35 * 7 + 70) / 8) / 100)
        assert _wait_latest(store, "hw.gpu.memory.usage", {"hw.id": parent}).value == (
            (3000 / 8 * 7 + 9000) // 1 * MIB)
        assert _wait_latest(store, "hw.gpu.memory.limit", {"hw.id": parent}).value == (
            MI300X_MIB * MIB)
        for number, used in ((3, 9000), (0, 3000 / 8), (7, 3000 / 8)):
            part = found[number].attributes["hw.id"]
            assert _wait_latest(store, "hw.gpu.memory.usage", {"hw.id": part}).value == (
                used * MIB)
        limits = sum(p.value for p in found.values())
        assert limits <= MI300X_MIB * MIB  # the partitions never add up to more than the GPU

        # Socket power and energy: on the physical GPU, once, with the value the node served.
        power = _wait_latest(store, "hw.power", {"hw.id": parent})
        assert power.value == pytest.approx(612, abs=1)
        assert "hw.parent" not in power.attributes
        energy = store.wait_for(
            lambda s: len(pts := s.points("hw.energy", {"hw.id": parent})) >= 2 and pts,
            timeout=30, what="energy on the parent")
        assert energy[-1].value > energy[0].value
        _wait_latest(store, "hw.power", {"hw.id": SPX_UUID})
        # (hw.power, hw.energy, hw.temperature carry no hw.vendor: the conventions' model lists
        # none for them; every device of this node is AMD.)
        for metric in ("hw.power", "hw.energy", "hw.temperature", "gpu.power.limit"):
            owners = {p.attributes["hw.id"] for p in store.points(metric)}
            assert owners == {parent, SPX_UUID}, metric

        # Processes are on the partition that runs them.
        for pid, number in ((hip[0], 3), (hip[1], 5)):
            point = _wait_latest(store, "gpu.process.memory.usage", {"process.pid": pid})
            assert point.attributes["hw.id"] == found[number].attributes["hw.id"]
            assert point.attributes["hw.parent"] == parent

        # The unpartitioned MI300X stays one device with no tree attributes.
        spx = _wait_latest(store, "hw.gpu.memory.limit", {"hw.id": SPX_UUID})
        assert spx.value == MI300X_MIB * MIB
        assert not {"hw.parent", "amd.partition.id"} & set(spx.attributes)
        assert spx.attributes["gpu.index"] == 1
        assert "Traceback" not in agent.log()
    finally:
        agent.close()


def test_a_library_with_partition_uuids_keeps_every_name(tmp_path: Path) -> None:
    """ROCm 7.12 puts the partition id into the UUID (rocm-systems PR 3977): amd-smi then
    prints new UUIDs, but the physical GPU and its partitions keep the ``hw.id`` older
    libraries gave them, so their series carry on across the upgrade; the partitions' own UUIDs
    stay allocation names, and partition modes answer on every partition."""
    text = SCENARIO.replace("{compute: CPX, memory: NPS4}", "{compute: DPX}")
    views = []
    for name, rocm in (("new", "7.12"), ("old", "7.0")):
        scenario = write_scenario(tmp_path, f"amd_rocm_version: '{rocm}'\n{text}",
                                  name=f"{name}.yaml")
        with SimulatedNode.start(scenario, state_dir=tmp_path / name) as node:
            lib = library_view(node)
            out = run_backend(node, """
                d = devs[0]
                out = [d.identity.uuid, [p.identity.uuid for p in d.partitions()],
                       [list(p.identity.partition.allocation_ids) for p in d.partitions()]]
            """)
            views.append((lib, out))
    (new_lib, (new_parent, new_parts, new_alloc)), (old_lib, (old_parent, old_parts, _)) = views
    new_uuids = [p["uuid"] for p in new_lib["processors"][:2]]
    assert len(set(new_uuids)) == 2 and old_lib["processors"][0]["uuid"] not in new_uuids
    assert [p["compute"] for p in new_lib["processors"][:2]] == ["DPX", "DPX"]
    assert old_parent == new_parent == old_lib["processors"][0]["uuid"]
    assert new_parts == old_parts == [f"{old_parent}/xcp0", f"{old_parent}/xcp1"]
    assert [alloc[-1] for alloc in new_alloc] == new_uuids


def test_the_partitions_of_a_round_share_one_table_read(node: SimulatedNode) -> None:
    """Eight partitions read XCP 0's table once per round, not eight times (a clock that does
    not move: every read falls within one round)."""
    out = run_backend(node, """
        from gpu_otel_agent.plugins.amd import partition_readings
        d = devs[0]
        table = partition_readings.SharedTable(backend._smi, d.handle, clock=lambda: 0.0)
        readers = [partition_readings.xcp_reader(n, table) for n in range(8)]
        got = [r(backend._smi, None)[0].value for r in readers]
        out = {"busy": got}
    """)
    assert out["busy"] == [pytest.approx(0.35)] * 8
    calls = node.stats()["calls"]
    assert isinstance(calls, dict)
    assert calls.get("amdsmi_get_gpu_metrics_info") == 1  # nothing else read it (no probe)


def test_a_vm_fault_on_partition_5_arrives_at_the_receiver(
    node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    """End to end: the health event of a VM fault raised on partition 5 names that partition
    (``hw.id`` and ``hw.parent``)."""
    parent = library_view(node)["processors"][0]["uuid"]
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
    try:
        store = otlp_grpc_receiver.store
        store.wait_for(lambda s: s.points("hw.gpu.memory.limit", {"hw.parent": parent}),
                       timeout=30, what="the partitions")
        store.wait_for(lambda s: s.points("hw.status", {"hw.id": parent}),
                       timeout=30, what="the GPU's state")
        node.command({"op": "event", "device": CPX, "partition": 5, "type": "vm_fault",
                      "message": "VM fault at 0x7f0000002000"})
        fault = store.wait_for(lambda s: s.logs("gpu.amd.vm_fault"), timeout=30,
                               what="gpu.amd.vm_fault")[0]
        assert fault.attributes["hw.id"] == f"{parent}/xcp5"
        assert fault.attributes["hw.parent"] == parent
        assert "0x7f0000002000" in fault.body
    finally:
        agent.close()
