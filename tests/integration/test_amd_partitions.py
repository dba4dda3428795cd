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

from gpu_otel_agent.plugins.nvidia.simulator import SimulatedNode
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
import json
import amdsmi as A
A.amdsmi_init(A.AmdSmiInitFlags.INIT_AMD_GPUS)
out = {"sockets": [], "processors": []}
for s in A.amdsmi_get_socket_handles():
    out["sockets"].append(A.amdsmi_get_socket_info(s))
for h in A.amdsmi_get_processor_handles():
    out["processors"].append({
        "bdf": A.amdsmi_get_gpu_device_bdf(h), "uuid": A.amdsmi_get_gpu_device_uuid(h),
        "compute": A.amdsmi_get_gpu_compute_partition(h),
        "memory": A.amdsmi_get_gpu_memory_partition(h),
        "partition_id": A.amdsmi_get_gpu_kfd_info(h)["current_partition_id"],
        "vram_total": A.amdsmi_get_gpu_vram_usage(h)["vram_total"],
        "power": A.amdsmi_get_power_info(h)["socket_power"],
        "pids": [p["pid"] for p in A.amdsmi_get_gpu_process_list(h)],
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
    node.command({"op": "proc_add", "device": CPX, "partition": 3, "pid": hip[0],
                  "used_memory_mib": 1000, "sm_util": 50})
    lib = library_view(node)
    assert lib["sockets"] == ["0000:0C:00", "0000:2C:00"]  # one socket per physical GPU
    cpx = [p for p in lib["processors"] if p["bdf"].startswith("0000:0c:00.")]
    assert [p["bdf"] for p in cpx] == [f"0000:0c:00.{i}" for i in range(8)]
    assert [p["partition_id"] for p in cpx] == list(range(8))
    assert {p["compute"] for p in cpx} == {"CPX"} and {p["memory"] for p in cpx} == {"NPS4"}
    # The library version modelled by default (ROCm <= 7.11) gives all eight one UUID.
    assert len({p["uuid"] for p in cpx}) == 1
    assert {p["vram_total"] for p in cpx} == {MI300X_MIB // 8}
    assert {p["power"] for p in cpx} == {612}  # the socket's power, on every partition
    assert [p["pids"] for p in cpx] == [[], [], [], [hip[0]], [], [], [], []]
    spx = [p for p in lib["processors"] if p["bdf"].startswith("0000:2c:00.")]
    assert len(spx) == 1 and spx[0]["compute"] == "SPX" and spx[0]["partition_id"] == 0


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
        # Activity and VRAM use are each partition's, as the node serves them.
        for number, busy, used in ((3, 0.70, 9000), (0, 0.35, 3000), (7, 0.35, 3000)):
            part = found[number].attributes["hw.id"]
            assert _wait_latest(store, "hw.gpu.utilization",
                                {"hw.id": part, "hw.gpu.task": "general"}).value == (
                pytest.approx(busy))
            assert _wait_latest(store, "hw.gpu.memory.usage", {"hw.id": part}).value == (
                used * MIB)

        # Socket power and energy: on the physical GPU, once, with the value the node served.
        power = _wait_latest(store, "hw.power", {"hw.id": parent})
        assert power.value == pytest.approx(612, abs=1)
        assert "hw.parent" not in power.attributes
        energy = store.wait_for(
            lambda s: len(pts := s.points("hw.energy", {"hw.id": parent})) >= 2 and pts,
            timeout=30, what="energy on the parent")
        assert energy[-1].value > energy[0].value
        _wait_latest(store, "hw.power", {"hw.id": SPX_UUID})
        for metric in ("hw.power", "hw.energy", "hw.temperature", "gpu.power.limit"):
            owners = {p.attributes["hw.id"] for p in store.points(metric, {"hw.vendor": "amd"})}
            assert owners == {parent, SPX_UUID}, metric
        assert not store.points("hw.gpu.utilization", {"hw.id": parent})

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


def test_a_library_with_partition_uuids_keeps_the_parent_name(tmp_path: Path) -> None:
    """ROCm 7.12 puts the partition id into the UUID: the partitions are named by their own
    UUIDs then, and the physical GPU keeps the name older libraries gave all of them."""
    text = SCENARIO.replace("{compute: CPX, memory: NPS4}",
                            "{compute: DPX, memory: NPS1, uuid: per_partition}")
    shared_text = SCENARIO.replace("{compute: CPX, memory: NPS4}", "{compute: DPX}")
    views = []
    for name, body in (("new", text), ("old", shared_text)):
        scenario = write_scenario(tmp_path, body, name=f"{name}.yaml")
        with SimulatedNode.start(scenario, state_dir=tmp_path / name) as node:
            lib = library_view(node)
            out = run_backend(node, """
                d = devs[0]
                out = [d.identity.uuid, [p.identity.uuid for p in d.partitions()]]
            """)
            views.append((lib, out))
    (new_lib, (new_parent, new_parts)), (old_lib, (old_parent, old_parts)) = views
    new_uuids = [p["uuid"] for p in new_lib["processors"][:2]]
    assert len(set(new_uuids)) == 2 and new_parts == new_uuids
    assert old_parent == new_parent == old_lib["processors"][0]["uuid"]
    assert old_parts == [f"{old_parent}/xcp0", f"{old_parent}/xcp1"]
