"""A group's kept field-value array answers as pynvml's own wrapper and attribute path do.

``field_batch.FieldBatch`` resets a kept array instead of building one per call, and decodes
it with one ``struct`` while every field answers SUCCESS with the value type it answered
last. The references: the array pynvml's ``nvmlDeviceGetFieldValues`` builds (the same input
bytes), and pynvml's per-attribute reading of the same answer (``nvml.field_value``), over
answers whose codes, value types and values change from read to read, and over the simulated
library's real answers under injected errors.
"""

from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator

import pynvml
import pytest

from gpu_otel_agent.plugins.nvidia.field_batch import FieldBatch, FieldId
from gpu_otel_agent.plugins.nvidia.nvml import field_value
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.nvidia.test_field_values import _MEMBER_OF
from tests.unit.simulator.simhelpers import run_client, write_scenario

Answer = tuple[int, int, float | int | None]


def _by_attribute(values: ctypes.Array[pynvml.c_nvmlFieldValue_t]) -> list[Answer]:
    return [(v.nvmlReturn, v.timestamp,
             field_value(v) if v.nvmlReturn == pynvml.NVML_SUCCESS else None) for v in values]


def _as_pynvml_builds(ids: list[FieldId]) -> bytes:
    """The input array of pynvml's wrapper, built as it builds it."""
    values = (pynvml.c_nvmlFieldValue_t * len(ids))()
    for i, field in enumerate(ids):
        try:
            (values[i].fieldId, values[i].scopeId) = field  # type: ignore[misc]
        except TypeError:
            values[i].fieldId = field
    return bytes(values)


def test_the_kept_array_starts_each_call_as_pynvmls_fresh_one() -> None:
    ids: list[FieldId] = [186, (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0xFFFFFFFF),
                          83, (pynvml.NVML_FI_DEV_NVLINK_GET_STATE, 3)]
    batch = FieldBatch(None, ids)
    assert bytes(batch.array) == _as_pynvml_builds(ids)
    ctypes.memset(batch.array, 0x5A, ctypes.sizeof(batch.array))  # a previous answer
    with pytest.raises(pynvml.NVMLError):  # no library loaded here: pynvml's own error
        batch.call(None)
    assert bytes(batch.array) == _as_pynvml_builds(ids)


def test_changing_answers_read_as_pynvmls_attribute_path() -> None:
    """Rounds of the same kinds (the one-struct path) and rounds where a code or a value type
    changes (must not be read by the struct built for the last kinds)."""
    rand = random.Random(41)
    fields = 9
    batch = FieldBatch(None, list(range(1, fields + 1)))
    kinds = [rand.choice(list(_MEMBER_OF)) for _ in range(fields)]
    fast_rounds = 0
    for round_ in range(400):
        change = rand.random()
        if change < 0.1:
            kinds[rand.randrange(fields)] = rand.choice(list(_MEMBER_OF))
        for record, kind in zip(batch.array, kinds, strict=True):
            member, draw = _MEMBER_OF[kind]
            record.timestamp = rand.randrange(-2**63, 2**63)
            record.latencyUsec = rand.randrange(2**31)
            record.valueType = kind
            record.nvmlReturn = pynvml.NVML_SUCCESS
            setattr(record.value, member, draw(rand))
        if 0.1 <= change < 0.2:
            batch.array[rand.randrange(fields)].nvmlReturn = rand.choice(
                (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_TIMEOUT))
        fast_rounds += batch._whole is not None  # how often the one struct read it
        got = [tuple(answer) for answer in batch.answers()]
        want = _by_attribute(batch.array)
        assert got == want, round_
        assert [type(v) for _, _, v in got] == [type(v) for _, _, v in want]
    assert 250 < fast_rounds < 400  # both ways taken


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("batch")
    scenario = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    power_w: {random: {min: 300, max: 690}}
    temperature_c: {random: {min: 50, max: 70}}
"""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as n:
        yield n


def test_real_answers_under_injected_errors_read_as_pynvml_reads_them(
        node: SimulatedNode) -> None:
    node.command({"op": "chaos", "rate": 0.2, "seed": 5,
                  "functions": "nvmlDeviceGetFieldValues"})
    try:
        out = run_client(node, """
            import time
            from gpu_otel_agent.plugins.nvidia.field_batch import FieldBatch
            from gpu_otel_agent.plugins.nvidia.nvml import field_value
            ids = [308, N.NVML_FI_DEV_MEMORY_TEMP, N.NVML_FI_DEV_POWER_INSTANT,
                   N.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 9999,
                   (N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0xFFFFFFFF)]
            batch = FieldBatch(None, ids)
            out = {"same": 0, "differ": [], "failed": [], "codes": set(), "values": set()}
            for _ in range(300):
                try:
                    batch.call(h[0])
                except N.NVMLError as error:
                    out["failed"].append(error.value)
                    continue
                got = [list(a) for a in batch.answers()]
                want = [[v.nvmlReturn, v.timestamp,
                         field_value(v) if v.nvmlReturn == 0 else None] for v in batch.array]
                if got == want:
                    out["same"] += 1
                else:
                    out["differ"].append([got, want])
                out["codes"].update(code for code, _, _ in got)
                out["values"].add(got[2][2])
                time.sleep(0.005)
            out["codes"], out["values"] = sorted(out["codes"]), len(out["values"])
        """, timeout=120)
    finally:
        node.command({"op": "chaos", "off": True})
    assert not out["differ"]
    assert out["same"] > 100
    assert len(out["codes"]) >= 3  # success, the unknown field's error, injected ones
    assert out["values"] >= 2  # the power changed between reads


def test_a_call_answers_as_pynvmls_wrapper_does(node: SimulatedNode) -> None:
    out = run_client(node, """
        from gpu_otel_agent.plugins.nvidia.field_batch import FieldBatch
        ids = [308, N.NVML_FI_DEV_MEMORY_TEMP, N.NVML_FI_DEV_POWER_INSTANT, 9999,
               (N.NVML_FI_DEV_NVLINK_GET_STATE, 0), (N.NVML_FI_DEV_NVLINK_GET_STATE, 40)]
        batch = FieldBatch(None, ids)
        out = []
        for _ in range(3):
            fv = N.nvmlDeviceGetFieldValues(h[0], ids)
            batch.call(h[0])
            out.append([[[v.nvmlReturn, v.valueType, v.fieldId, v.scopeId] for v in a]
                        for a in (fv, batch.array)])
    """)
    for wrapper, batch in out:
        assert batch == wrapper
    assert {code for code, _, _, _ in out[0][0]} >= {0}  # some served
    assert any(code != 0 for code, _, _, _ in out[0][0])  # and some not
