"""MIG as real GPUs lay it out, served by the simulated node and read through real pynvml.

Real layouts (simulator spec, 2026-11-25): GPU instance ids follow placement (not 0..n-1; DCGM
issue #138 shows ids 9, 10, 3, 2 on one A100 80GB), a GPU instance may hold several compute
instances (each its own MIG device: handle, MIG- UUID, compute instance id) that share its
memory, MIG device indices may leave holes below the max count (NOT_FOUND there), and
processes and XIDs carry their compute instance id.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimCommandError, SimulatedNode
from tests.unit.simulator.simhelpers import (
    client_env,
    read_json_line,
    run_client,
    start_client,
    write_scenario,
)

pytestmark = [pytest.mark.integration, pytest.mark.harness]  # tests the simulated node
MIB = 1024 * 1024
MIG_A = "MIG-0a1b2c3d-0000-5000-8000-000000000001"

SCENARIO = f"""
devices:
  - model: NVIDIA A100-SXM4-80GB
    mig:
      - profile: 3g.40gb
        gpu_instance_id: 2
        memory_used_mib: 20000
        compute_instances:
          - {{profile: 1c.3g.40gb, mig_index: 1, uuid: {MIG_A}, sm_active: 30}}
          - {{profile: 2c.3g.40gb, mig_index: 2, sm_active: 60}}
      - {{profile: 1g.10gb, gpu_instance_id: 13, mig_index: 5, memory_used_mib: 1000}}
  - model: NVIDIA H100 80GB HBM3
    mig:
      - {{profile: 3g.40gb, gpu_instance_id: 1}}
processes:
  - {{device: 0, mig: 0, ci: 1, pid: 4242, used_memory_mib: 4000}}
  - {{device: 0, mig: 0, pid: 4343, used_memory_mib: 2000}}
  - {{device: 0, mig: 1, pid: 4444, used_memory_mib: 500}}
"""

# Every MIG device of GPU 0 as go-nvlib's VisitMigDevices finds it: each index up to the max
# count, NOT_FOUND skipped (not the end).
VISIT = """
def visit(parent):
    found = {}
    for i in range(N.nvmlDeviceGetMaxMigDeviceCount(parent)):
        try:
            m = N.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
        except N.NVMLError_NotFound:
            found[i] = None
            continue
        mem = N.nvmlDeviceGetMemoryInfo(m)
        attrs = N.nvmlDeviceGetAttributes_v2(m)
        found[i] = {"uuid": N.nvmlDeviceGetUUID(m), "name": N.nvmlDeviceGetName(m),
                    "gi": N.nvmlDeviceGetGpuInstanceId(m),
                    "ci": N.nvmlDeviceGetComputeInstanceId(m),
                    "index": N.nvmlDeviceGetIndex(m), "total": mem.total, "used": mem.used,
                    "ci_slices": attrs.computeInstanceSliceCount,
                    "gi_slices": attrs.gpuInstanceSliceCount, "sms": attrs.multiprocessorCount,
                    "procs": sorted((p.pid, p.gpuInstanceId, p.computeInstanceId)
                                    for p in N.nvmlDeviceGetComputeRunningProcesses(m))}
    return found
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("miglayout")
    with SimulatedNode.start(write_scenario(tmp, SCENARIO), state_dir=tmp / "state") as n:
        yield n


def test_indices_leave_holes_and_ids_follow_the_scenario(node: SimulatedNode) -> None:
    out = run_client(node, VISIT + "out = {str(k): v for k, v in visit(h[0]).items()}")
    assert sorted(i for i, v in out.items() if v is not None) == ["1", "2", "5"]
    assert out["0"] is None and out["3"] is None  # holes: NOT_FOUND below the max count
    first, second, small = out["1"], out["2"], out["5"]
    assert (first["gi"], first["ci"], second["gi"], second["ci"]) == (2, 0, 2, 1)
    assert (small["gi"], small["ci"]) == (13, 0)
    # nvmlDeviceGetIndex on a MIG handle: its MIG device index (nvml.h).
    assert [first["index"], second["index"], small["index"]] == [1, 2, 5]
    assert first["uuid"] == MIG_A and second["uuid"].startswith("MIG-")
    assert first["name"].endswith(" MIG 1c.3g.40gb") and second["name"].endswith(" MIG 2c.3g.40gb")
    assert small["name"].endswith(" MIG 1g.10gb")
    assert (first["ci_slices"], first["gi_slices"], second["ci_slices"]) == (1, 3, 2)
    assert (first["sms"], second["sms"]) == (14, 28)


def test_compute_instances_share_their_gpu_instances_memory(node: SimulatedNode) -> None:
    out = run_client(node, VISIT + """
out = {"migs": {str(k): v for k, v in visit(h[0]).items()},
       "parent_used": N.nvmlDeviceGetMemoryInfo(h[0], version=N.nvmlMemory_v2).used}
""")
    first, second, small = out["migs"]["1"], out["migs"]["2"], out["migs"]["5"]
    assert first["total"] == second["total"] == int(39.25 * 1024) * MIB  # -lgip: 39.25 GiB
    assert first["used"] == second["used"] == 20000 * MIB  # the GPU instance's, shared
    assert small["total"] == int(9.5 * 1024) * MIB
    # The GPU's used memory counts each GPU instance once, not once per MIG device.
    assert out["parent_used"] == (20000 + 1000) * MIB


def test_processes_are_listed_per_compute_instance(node: SimulatedNode) -> None:
    out = run_client(node, VISIT + """
out = {"migs": {str(k): v["procs"] for k, v in visit(h[0]).items() if v},
       "parent": sorted((p.pid, p.gpuInstanceId, p.computeInstanceId)
                        for p in N.nvmlDeviceGetComputeRunningProcesses(h[0]))}
""")
    assert out["migs"] == {"1": [[4343, 2, 0]], "2": [[4242, 2, 1]], "5": [[4444, 13, 0]]}
    assert out["parent"] == [[4242, 2, 1], [4343, 2, 0], [4444, 13, 0]]


def test_xid_carries_its_compute_instance(node: SimulatedNode) -> None:
    client = start_client(node, """
        s = N.nvmlEventSetCreate()
        N.nvmlDeviceRegisterEvents(h[0], N.nvmlEventTypeXidCriticalError, s)
        print(json.dumps({"ready": True}), flush=True)
        for _ in range(3):
            e = N.nvmlEventSetWait_v2(s, 10000)
            print(json.dumps([e.eventData, e.gpuInstanceId, e.computeInstanceId]), flush=True)
    """)
    try:
        assert read_json_line(client)["ready"]
        answer = node.command({"op": "xid", "device": 0, "code": 43, "mig": 0, "ci": 1})
        assert (answer["gpu_instance_id"], answer["compute_instance_id"]) == (2, 1)
        assert read_json_line(client) == [43, 2, 1]
        # Scoped to the GPU instance only: no compute instance (NVML's 0xFFFFFFFF).
        node.command({"op": "xid", "device": 0, "code": 31, "mig": 1})
        assert read_json_line(client) == [31, 13, 0xFFFFFFFF]
        # The command line names the compute instance too.
        done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "sim", "xid",
                               "--device", "0", "--code", "45", "--mig", "0", "--ci", "1"],
                              env=client_env(node), capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert read_json_line(client) == [45, 2, 1]
    finally:
        client.kill()
        client.wait()


def test_gpm_per_gpu_instance_and_per_mig_device(node: SimulatedNode) -> None:
    """nvmlGpmMigSampleGet: the GPU instance's activity (its compute instances weighted by
    their slices); nvmlGpmSampleGet on a MIG handle (nvml.h: "supports the device handle and
    MIG device handle"): the compute instance's own."""
    out = run_client(node, """
def sm(sample_get):
    s1, s2 = N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()
    sample_get(s1); time.sleep(0.15); sample_get(s2)
    return gpm_metrics(s1, s2, N.NVML_GPM_METRIC_SM_UTIL)[0].value
hopper = h[1]
gi = N.nvmlGpmMigSampleGet
mig = N.nvmlDeviceGetMigDeviceHandleByIndex(hopper, 0)
out = {"gi": sm(lambda b: gi(hopper, 1, b)), "mig": sm(lambda b: N.nvmlGpmSampleGet(mig, b))}
""")
    assert out["gi"] == out["mig"]  # one compute instance spanning its GPU instance


def test_mig_parent_and_mig_handles_answer_as_nvml_h_says(node: SimulatedNode) -> None:
    out = run_client(node, """
p = h[0]
m = N.nvmlDeviceGetMigDeviceHandleByIndex(p, 1)
vol, agg = N.NVML_VOLATILE_ECC, N.NVML_AGGREGATE_ECC
unc = N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
fields = N.nvmlDeviceGetFieldValues(p, [N.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
                                        N.NVML_FI_DEV_ECC_DBE_AGG_TOTAL,
                                        N.NVML_FI_DEV_REMAPPED_UNC])
def uptime(handle):  # nvmlDeviceGetGpuUptime_v1 has no pynvml wrapper
    import ctypes
    value = ctypes.c_uint(0)
    ret = N._nvmlGetFunctionPointer("nvmlDeviceGetGpuUptime_v1")(handle, ctypes.byref(value))
    return [ret, value.value]
out = {"remap": err(N.nvmlDeviceGetRemappedRows, p),
       "vol": err(N.nvmlDeviceGetTotalEccErrors, p, unc, vol),
       "agg": N.nvmlDeviceGetTotalEccErrors(p, unc, agg),
       "fields": [f.nvmlReturn for f in fields],
       "mode_parent": N.nvmlDeviceGetComputeMode(p),
       "mode_mig": N.nvmlDeviceGetComputeMode(m),
       "mig_sram": N.nvmlDeviceGetMemoryErrorCounter(m, unc, vol, N.NVML_MEMORY_LOCATION_SRAM),
       "mig_dram": err(N.nvmlDeviceGetMemoryErrorCounter, m, unc, vol,
                       N.NVML_MEMORY_LOCATION_DRAM),
       "uptime": [uptime(p), uptime(m)]}
""")
    assert out["remap"] == "NVMLError_NotSupported"
    assert out["vol"] == "NVMLError_NotSupported" and isinstance(out["agg"], int)
    assert out["fields"] == [3, 0, 3]  # NOT_SUPPORTED, SUCCESS, NOT_SUPPORTED
    # nvidia-smi prints "Default" for a MIG-enabled parent (mig-parted#31); nvml.h has the
    # compute mode on the MIG handle too.
    assert out["mode_parent"] == 0 and out["mode_mig"] == 0
    assert out["mig_sram"] == 0 and out["mig_dram"] == "NVMLError_NotSupported"
    # "For MIG device handles, the parent GPU uptime is returned."
    (ret_parent, parent), (ret_mig, mig) = out["uptime"]
    assert ret_parent == ret_mig == 0 and abs(parent - mig) <= 1


def test_bad_mig_requests_are_refused_and_change_nothing(node: SimulatedNode) -> None:
    for request, message in (
            ({"op": "xid", "device": 0, "code": 43, "ci": 1}, "'ci' needs 'mig'"),
            ({"op": "proc_add", "device": 0, "pid": 99, "ci": 0}, "'ci' needs 'mig'"),
            ({"op": "xid", "device": 0, "code": 43, "mig": 0, "ci": 2},
             "GPU instance 2 has 2 compute instance(s), no 2"),
            ({"op": "ecc", "device": 0, "mig": 0, "type": "single_bit"},
             "uncorrectable (double_bit) errors only"),
            ({"op": "proc_add", "device": 0, "pid": 99, "mig": 0, "ci": "x"},
             "'ci' must be an integer")):
        with pytest.raises(SimCommandError, match=re.escape(message)):
            node.command(request)
    assert node.command({"op": "stats"})["processes"] == 3


def test_default_ids_follow_placement_as_on_a_real_a100(tmp_path: Path) -> None:
    """Without gpu_instance_id, an instance gets an id from the range real GPUs give its size
    (never 1..n). DCGM issue #138 (`nvidia-smi mig -lgi`, A100 80GB): 2g.20gb at 0:2 is 3,
    1g.10gb at 2:1 and 3:1 are 9 and 10, 3g.40gb at 4:4 is 2 on one GPU (the node gives the
    same), 5, 13, 14, 1 on the next (which id of its range the driver picks varies)."""
    scenario = write_scenario(tmp_path, """
devices:
  - model: NVIDIA A100-SXM4-80GB
    mig: [{profile: 2g.20gb}, {profile: 1g.10gb}, {profile: 1g.10gb}, {profile: 3g.40gb}]
""")
    with SimulatedNode.start(scenario, state_dir=tmp_path / "state") as fresh:
        out = run_client(fresh, VISIT + """
out = sorted((v["name"].rsplit(" MIG ", 1)[1], v["gi"]) for v in visit(h[0]).values() if v)
""")
        fewer = fresh.command({"op": "mig", "device": 0, "set": "2g.20gb,1g.10gb,3g.40gb"})
        again = fresh.command({"op": "mig", "device": 0,
                               "set": "2g.20gb,1g.10gb,3g.40gb,1g.10gb"})
    assert out == [["1g.10gb", 9], ["1g.10gb", 10], ["2g.20gb", 3], ["3g.40gb", 2]]
    assert sorted(i["gpu_instance_id"] for i in fewer["instances"]) == [2, 3, 9]
    # Created at run time, a GPU instance takes its first free placement's id: 3:1 is free
    # again, so the new 1g.10gb is 10 again (a new MIG device: a new UUID).
    created = [i for i in again["instances"] if i["uuid"] not in
               {f["uuid"] for f in fewer["instances"]}]
    assert [(i["profile"], i["gpu_instance_id"]) for i in created] == [("1g.10gb", 10)]
