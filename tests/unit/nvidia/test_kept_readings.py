"""The fast group's direct calls hand back the readings of an unchanged answer again: what they
hand back equals readings built afresh from pynvml's own wrappers, over changing node state.

``readings._utilization``/``_memory_v2``/the SM clock read keep the last answer per device and
the readings made of it. The reference is pynvml's wrapper of the same function (a real C
library, loaded by pynvml; nothing patched), read before and after, its values made into
readings here, field by field (metric, attributes, value and its type, time). A device whose
values change (random utilization, memory and clock) is read in turn with one whose values
stay, from two threads (the device threads of a node), and the steady device must get its
readings again (the saving) while the changing one gets new ones.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("kept")
    scenario = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: {random: {min: 0, max: 100}}
    utilization_memory: {random: {min: 0, max: 100}}
    memory_used_mib: {random: {min: 1000, max: 70000}}
    sm_clock_mhz: {random: {min: 900, max: 1980}}
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: 40
    utilization_memory: 12
    memory_used_mib: 1234
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: {sine: {min: 0, max: 100, period_s: 2}}
    memory_used_mib: {random: {min: 1000, max: 2000}}
"""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as n:
        yield n


def test_kept_readings_equal_fresh_ones_from_pynvmls_wrappers(node: SimulatedNode) -> None:
    out = run_client(node, """
        import threading, time
        from gpu_otel_agent.model.memory import memory_readings
        from gpu_otel_agent.model.snapshot import Reading
        from gpu_otel_agent.plugins.nvidia import readings as R

        calls = {c.name: c.read for c in R.FAST_CALLS}
        ours = (calls["nvmlDeviceGetUtilizationRates"], calls["nvmlDeviceGetMemoryInfo_v2"],
                calls["nvmlDeviceGetClockInfo"])

        def fresh(handle):
            u = N.nvmlDeviceGetUtilizationRates(handle)
            m = N.nvmlDeviceGetMemoryInfo(handle, version=N.nvmlMemory_v2)
            mhz = N.nvmlDeviceGetClockInfo(handle, N.NVML_CLOCK_SM)
            return (
                (Reading("hw.gpu.utilization", u.gpu / 100, (("hw.gpu.task", "general"),)),
                 Reading("gpu.memory.controller.utilization", u.memory / 100)),
                (*memory_readings(m.used, m.total), Reading("gpu.memory.reserved", m.reserved)),
                (Reading("gpu.clock.frequency", mhz * 1_000_000,
                         (("gpu.clock.domain", "sm"),)),),
            )

        def facts(readings):
            return [[r.metric, list(map(list, r.attributes)), repr(r.value),
                     type(r.value).__name__, r.time_ns] for r in readings]

        out = {"compared": 0, "differ": [], "again": [0, 0, 0], "new": [0, 0, 0],
               "seen": set()}
        lock = threading.Lock()

        def run(devices):
            last = {}
            for i in range(300):
                index = devices[i % len(devices)]
                handle = h[index]
                before = fresh(handle)
                got = tuple(read(handle) for read in ours)
                after = fresh(handle)
                with lock:
                    for part, (b, g, a) in enumerate(zip(before, got, after)):
                        if facts(b) == facts(a):
                            out["compared"] += 1
                            if facts(g) != facts(b):
                                out["differ"].append([index, facts(g), facts(b)])
                        held = last.get((index, part))
                        out["again" if held is g else "new"][index] += 1
                        last[index, part] = g
                    out["seen"].add(repr(facts(got[1])))
                if i % 3 == 0:
                    time.sleep(0.02)  # let the node's values move

        threads = [threading.Thread(target=run, args=(devices,)) for devices in ([0, 1], [2])]
        for t in threads: t.start()
        for t in threads: t.join()
        out["seen"] = len(out["seen"])
    """, timeout=120)
    assert not out["differ"], out["differ"][:3]
    assert out["compared"] > 600
    assert out["seen"] > 5  # the changing devices' memory moved
    again, new = out["again"], out["new"]
    assert again[1] > 400 and new[1] <= 3  # the steady device: its readings, handed back again
    assert new[0] > 20 and new[2] > 20  # the changing devices: new readings as values move
