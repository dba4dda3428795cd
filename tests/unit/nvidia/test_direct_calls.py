"""The fast group's direct calls answer as pynvml's wrappers do, values and errors.

``direct_calls`` calls the library with kept out-structures and unpacks them by the offsets
pynvml's types declare. The reference is pynvml's own wrapper of the same function, read
through its attribute path, on the simulated library (a real C library, loaded by pynvml):
over changing values (a reading is compared where the wrapper's answers before and after it
agree), and under injected errors (the same exception class and code).
"""

from __future__ import annotations

from collections.abc import Iterator

import pynvml
import pytest

from gpu_otel_agent.plugins.nvidia import direct_calls
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario


def test_the_layouts_are_found_in_the_installed_pynvml() -> None:
    assert direct_calls._UTILIZATION is not None
    assert direct_calls._MEMORY_V2 is not None


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("direct")
    scenario = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: {random: {min: 0, max: 100}}
    utilization_memory: {random: {min: 0, max: 100}}
    memory_used_mib: {random: {min: 1000, max: 70000}}
    sm_clock_mhz: {random: {min: 900, max: 1980}}
  - model: NVIDIA H100 80GB HBM3
    memory_used_mib: 1234
"""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as n:
        yield n


def test_changing_values_read_as_pynvmls_wrappers_read_them(node: SimulatedNode) -> None:
    out = run_client(node, """
        import threading, time
        from gpu_otel_agent.plugins.nvidia import direct_calls as D
        sm = D.clock_type(N.NVML_CLOCK_SM)
        mem = D.clock_type(N.NVML_CLOCK_MEM)

        def wrapped(handle):
            u = N.nvmlDeviceGetUtilizationRates(handle)
            m = N.nvmlDeviceGetMemoryInfo(handle, version=N.nvmlMemory_v2)
            return [[u.gpu, u.memory], [m.total, m.reserved, m.used],
                    N.nvmlDeviceGetClockInfo(handle, N.NVML_CLOCK_SM),
                    N.nvmlDeviceGetClockInfo(handle, N.NVML_CLOCK_MEM)]

        def direct(handle):
            return [list(D.utilization_rates(handle)), list(D.memory_v2(handle)),
                    D.clock_info(handle, sm), D.clock_info(handle, mem)]

        out = {"compared": 0, "differ": [], "seen": set()}
        def run():
            for i in range(400):
                handle = h[i % 2]
                before, got, after = wrapped(handle), direct(handle), wrapped(handle)
                if before == after:
                    out["compared"] += 1
                    if got != before:
                        out["differ"].append([got, before])
                out["seen"].add(repr(got))
                time.sleep(0.002)
        run()
        worker = threading.Thread(target=run)  # another thread: its own out-structures
        worker.start(); worker.join()
        out["seen"] = len(out["seen"])
    """, timeout=120)
    assert not out["differ"]
    assert out["compared"] > 200
    assert out["seen"] > 5  # the values changed


@pytest.mark.parametrize(("function", "code"), [
    ("nvmlDeviceGetUtilizationRates", "GPU_IS_LOST"),
    ("nvmlDeviceGetMemoryInfo_v2", "NO_PERMISSION"),
    ("nvmlDeviceGetClockInfo", "UNKNOWN"),
])
def test_an_error_is_pynvmls_own(node: SimulatedNode, function: str, code: str) -> None:
    node.command({"op": "fail", "device": 0, "function": function, "code": code, "count": 2})
    out = run_client(node, f"""
        from gpu_otel_agent.plugins.nvidia import direct_calls as D
        calls = {{
            "nvmlDeviceGetUtilizationRates": (
                lambda: D.utilization_rates(h[0]),
                lambda: N.nvmlDeviceGetUtilizationRates(h[0])),
            "nvmlDeviceGetMemoryInfo_v2": (
                lambda: D.memory_v2(h[0]),
                lambda: N.nvmlDeviceGetMemoryInfo(h[0], version=N.nvmlMemory_v2)),
            "nvmlDeviceGetClockInfo": (
                lambda: D.clock_info(h[0], D.clock_type(N.NVML_CLOCK_SM)),
                lambda: N.nvmlDeviceGetClockInfo(h[0], N.NVML_CLOCK_SM)),
        }}["{function}"]
        out = []
        for call in calls:
            try:
                call()
                out.append(None)
            except N.NVMLError as error:
                out.append([type(error).__name__, error.value])
        out.append(calls[0]() is not None)  # the fault used up: answers again
    """)
    direct, wrapper, again = out
    assert direct is not None and direct == wrapper
    assert direct[1] == getattr(pynvml, f"NVML_ERROR_{code}")
    assert again


def test_a_missing_function_fails_as_pynvmls_lookup_does(node: SimulatedNode) -> None:
    out = run_client(node, """
        from gpu_otel_agent.plugins.nvidia.library import function
        out = []
        for look_up in (function, N._nvmlGetFunctionPointer):
            try:
                look_up("nvmlDeviceGetNoSuchThing")
                out.append(None)
            except N.NVMLError as error:
                out.append([type(error).__name__, error.value])
        out.append(function("nvmlDeviceGetClockInfo") is N._nvmlGetFunctionPointer(
            "nvmlDeviceGetClockInfo"))
    """)
    ours, pynvmls, same = out
    assert ours is not None and ours == pynvmls
    assert ours[1] == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    assert same  # the very function object pynvml calls
