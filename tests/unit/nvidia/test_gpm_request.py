"""A GPM read's request, made from bytes, is pynvml's; its answers are pynvml's attribute path's.

``gpm._Request`` copies the bytes of a request built through pynvml's attributes and writes
the two sample pointers at their offsets; the answers are unpacked at the offsets pynvml's
types declare. The references: the bytes of a request built member by member as pynvml's
``c_nvmlGpmMetricsGet_t`` takes them, and, on the simulated library (a real C library loaded
by pynvml, nothing patched), ``pynvml.nvmlGpmMetricsGet`` on the very samples a read used, its
answers read through the attribute path, over changing node state; and an injected error
raises pynvml's own class and code.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pynvml
import pytest

from gpu_otel_agent.plugins.nvidia import gpm
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario


def _sample_at(address: int) -> object:
    return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlGpmSample_t)


@pytest.mark.parametrize(("first", "second"), [
    (0x1000, 0x2000), (0x7F00_DEAD_BEE0, 0x10), (0, 0xFFFF_FFFF_FFFF_FFF0)])
def test_the_request_bytes_are_pynvmls(first: int, second: int) -> None:
    request = gpm._REQUEST
    assert request is not None  # the installed pynvml lays it out as expected
    reference = pynvml.c_nvmlGpmMetricsGet_t()
    reference.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    reference.numMetrics = len(gpm.METRICS)
    reference.sample1 = _sample_at(first)
    reference.sample2 = _sample_at(second)
    for slot, (metric_id, _) in enumerate(gpm.METRICS):
        reference.metrics[slot].metricId = metric_id
    assert request.fresh == bytes(reference)[:request.samples_at] \
        + bytes(16) + bytes(reference)[request.samples_at + 16:]
    ours = pynvml.c_nvmlGpmMetricsGet_t()
    memoryview(ours).cast("B")[:len(request.head)] = request.head
    request.samples.pack_into(ours, request.samples_at,
                              gpm._address(_sample_at(first)), gpm._address(_sample_at(second)))
    assert bytes(ours) == bytes(reference)


def test_the_answers_are_read_where_pynvml_reads_them() -> None:
    request = gpm._REQUEST
    assert request is not None
    answer = pynvml.c_nvmlGpmMetricsGet_t()
    values = [12.5, float("nan"), 0.0, 99.75]
    codes = [pynvml.NVML_SUCCESS, pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED,
             pynvml.NVML_SUCCESS]
    for slot, (code, value) in enumerate(zip(codes, values, strict=True)):
        answer.metrics[slot].nvmlReturn = code
        answer.metrics[slot].value = value
    flat = request.answers.unpack_from(answer)
    expected = [(answer.metrics[slot].nvmlReturn, answer.metrics[slot].value)
                for slot in range(len(gpm.METRICS))]
    assert [repr(x) for x in zip(flat[0::2], flat[1::2], strict=True)] == \
        [repr(x) for x in expected]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("gpm")
    scenario = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: {random: {min: 0, max: 100}}
  - model: NVIDIA H100 80GB HBM3
    utilization_gpu: {sine: {min: 0, max: 100, period_s: 3}}
"""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as n:
        yield n


def test_reads_equal_pynvmls_attribute_path_on_the_same_samples(node: SimulatedNode) -> None:
    out = run_client(node, """
        import math, time
        from gpu_otel_agent.plugins.nvidia import gpm as G

        def reference(first, second):
            request = N.c_nvmlGpmMetricsGet_t()
            request.version = N.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(G.METRICS)
            request.sample1 = first
            request.sample2 = second
            for slot, (metric_id, _) in enumerate(G.METRICS):
                request.metrics[slot].metricId = metric_id
            N.nvmlGpmMetricsGet(request)
            return [[name, repr(request.metrics[slot].value / 100)]
                    for slot, (_, name) in enumerate(G.METRICS)
                    if request.metrics[slot].nvmlReturn == N.NVML_SUCCESS
                    and not math.isnan(request.metrics[slot].value)]

        readers = [G.GpmReader(handle) for handle in h]
        for reader in readers:
            reader.start()
        out = {"compared": 0, "differ": [], "seen": set(), "empty": 0}
        for i in range(60):
            time.sleep(0.11)
            for reader in readers:
                got = [[r.metric, repr(r.value)] for r in reader.read()]
                # After the read the pair it used is (current, previous): the newer became
                # the baseline. The library computes the same answer from the same samples.
                want = reference(reader._current, reader._previous)
                out["compared"] += 1
                if got != want:
                    out["differ"].append([got, want])
                out["seen"].add(repr(got))
                out["empty"] += not got
        out["seen"] = len(out["seen"])
    """, timeout=120)
    assert not out["differ"], out["differ"][:3]
    assert out["compared"] == 120
    assert out["seen"] > 20  # the values changed
    assert out["empty"] < 120


def test_an_error_is_pynvmls_own(node: SimulatedNode) -> None:
    node.command({"op": "fail", "device": 0, "function": "nvmlGpmMetricsGet",
                  "code": "GPU_IS_LOST", "count": 2})
    out = run_client(node, """
        import time
        from gpu_otel_agent.plugins.nvidia import gpm as G
        reader = G.GpmReader(h[0])
        reader.start()
        time.sleep(0.11)
        out = []
        try:
            reader.read()
            out.append(None)
        except N.NVMLError as error:
            out.append([type(error).__name__, error.value])
        try:
            request = N.c_nvmlGpmMetricsGet_t()
            request.version = N.NVML_GPM_METRICS_GET_VERSION
            request.sample1, request.sample2 = reader._current, reader._previous
            N.nvmlGpmMetricsGet(request)
            out.append(None)
        except N.NVMLError as error:
            out.append([type(error).__name__, error.value])
        time.sleep(0.11)
        out.append(len(reader.read()))  # the fault used up: answers again
    """)
    ours, pynvmls, again = out
    assert ours is not None and ours == pynvmls
    assert ours[1] == pynvml.NVML_ERROR_GPU_IS_LOST
    assert again > 0
