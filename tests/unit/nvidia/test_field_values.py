"""Field values read from the array's bytes equal what pynvml's attribute access reads.

``field_values.field_results`` relies on two things pynvml does not document:
``nvmlDeviceGetFieldValues`` returns the ctypes array of ``c_nvmlFieldValue_t`` the library
filled, and that structure's fields keep the offsets its ``_fields_`` declare. These tests
pin both for the installed nvidia-ml-py (pyproject.toml bounds its version): the reference is
pynvml's own per-attribute path (``value.nvmlReturn``, ``value.timestamp``,
``nvml.field_value``), on records of every value type and on a real answer of the simulated
library.
"""

from __future__ import annotations

import ctypes
import random
from collections.abc import Callable, Iterator

import pynvml
import pytest

from gpu_otel_agent.plugins.nvidia.field_values import LAYOUT, FieldResult, field_results
from gpu_otel_agent.plugins.nvidia.nvml import field_value
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario

_MEMBER_OF: dict[int, tuple[str, Callable[[random.Random], float | int]]] = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: ("dVal", lambda r: r.uniform(-1e12, 1e12)),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: ("uiVal", lambda r: r.randrange(2**32)),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: ("ulVal", lambda r: r.randrange(2**64)),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: ("ullVal", lambda r: r.randrange(2**64)),
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: ("sllVal", lambda r: r.randrange(-2**63, 2**63)),
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: ("siVal", lambda r: r.randrange(-2**31, 2**31)),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: ("usVal", lambda r: r.randrange(2**16)),
}


def _by_attribute(values: ctypes.Array[pynvml.c_nvmlFieldValue_t]) -> list[FieldResult]:
    """The reference: pynvml's per-attribute path, as the reader did before."""
    return [FieldResult(v.nvmlReturn, v.timestamp,
                        field_value(v) if v.nvmlReturn == pynvml.NVML_SUCCESS else None)
            for v in values]


def test_layout_is_found_in_the_installed_pynvml() -> None:
    assert LAYOUT is not None
    assert LAYOUT.size == ctypes.sizeof(pynvml.c_nvmlFieldValue_t)
    assert set(LAYOUT.values) == set(_MEMBER_OF)


def test_every_value_type_reads_as_pynvml_reads_it() -> None:
    rand = random.Random(41)
    kinds = list(_MEMBER_OF) * 20
    rand.shuffle(kinds)
    values = (pynvml.c_nvmlFieldValue_t * len(kinds))()
    for record, kind in zip(values, kinds, strict=True):
        member, draw = _MEMBER_OF[kind]
        record.fieldId = rand.randrange(1, 300)
        record.timestamp = rand.randrange(-2**63, 2**63)
        record.latencyUsec = rand.randrange(2**31)
        record.valueType = kind
        record.nvmlReturn = rand.choice((pynvml.NVML_SUCCESS, pynvml.NVML_SUCCESS,
                                         pynvml.NVML_ERROR_NOT_SUPPORTED))
        setattr(record.value, member, draw(rand))
    got = field_results(values)
    assert got == _by_attribute(values)
    assert any(r.value is not None for r in got) and any(r.value is None for r in got)
    # Same types as the attribute path: a double stays a float, an integer an int.
    assert {type(r.value) for r in got} == {type(r.value) for r in _by_attribute(values)}


def test_an_unknown_value_type_is_refused_as_before() -> None:
    values = (pynvml.c_nvmlFieldValue_t * 1)()
    values[0].valueType = 99
    with pytest.raises(ValueError, match="unknown NVML value type 99"):
        field_results(values)
    with pytest.raises(ValueError, match="unknown NVML value type 99"):
        field_value(values[0])


def test_without_a_layout_the_attribute_path_answers() -> None:
    values = (pynvml.c_nvmlFieldValue_t * 2)()
    values[0].valueType, values[0].value.dVal = pynvml.NVML_VALUE_TYPE_DOUBLE, 2.5
    values[1].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
    assert field_results(values, None) == [FieldResult(0, 0, 2.5),
                                           FieldResult(pynvml.NVML_ERROR_NOT_SUPPORTED, 0, None)]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("fields")
    scenario = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
    power_w: 512
    memory_temperature_c: null
"""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as n:
        yield n


def test_a_real_answer_is_an_array_read_the_same_both_ways(node: SimulatedNode) -> None:
    out = run_client(node, """
        import ctypes
        from gpu_otel_agent.plugins.nvidia.field_values import field_results
        from gpu_otel_agent.plugins.nvidia.nvml import field_value
        ids = [N.NVML_FI_DEV_POWER_INSTANT, N.NVML_FI_DEV_MEMORY_TEMP,
               N.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 9999,
               (N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0xFFFFFFFF)]
        fv = N.nvmlDeviceGetFieldValues(h[0], ids)
        out = {"array": isinstance(fv, ctypes.Array) and fv._type_ is N.c_nvmlFieldValue_t,
               "bytes": [list(r) for r in field_results(fv)],
               "attrs": [[f.nvmlReturn, f.timestamp,
                          field_value(f) if f.nvmlReturn == 0 else None] for f in fv]}
    """)
    assert out["array"], "nvmlDeviceGetFieldValues no longer returns the ctypes array"
    assert out["bytes"] == out["attrs"]
    codes = [code for code, _, _ in out["bytes"]]
    assert codes[0] == 0 and codes[1] == pynvml.NVML_ERROR_NOT_SUPPORTED  # both kinds met
    assert out["bytes"][0][2] > 0 and out["bytes"][0][1] > 0  # a power value and its time
