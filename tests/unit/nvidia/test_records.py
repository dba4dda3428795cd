"""Process records read from the array's bytes equal what pynvml's attributes read.

``records.Records`` reads fields at the offsets and types pynvml's structures declare. The
reference is pynvml's own per-attribute path, on arrays filled with random values (every
field at its full range) and on the simulated library's real answers.
"""

from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from gpu_otel_agent.plugins.nvidia.processes import _INFO, _UTIL
from gpu_otel_agent.plugins.nvidia.records import Records
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario


def _filled(structure: type[ctypes.Structure], count: int, seed: int) -> Any:
    rand = random.Random(seed)
    array = (structure * count)()
    for record in array:
        for name, ctype, *_ in structure._fields_:
            setattr(record, name, rand.randrange(2 ** (8 * ctypes.sizeof(ctype))))
    return array


@pytest.mark.parametrize("records", [_INFO, _UTIL], ids=["process info", "utilization"])
def test_bytes_and_attributes_agree(records: Records) -> None:
    assert records.format is not None  # the installed pynvml's layout is read, not guessed
    array = _filled(records.structure, 40, seed=41)
    expected = [tuple(getattr(r, n) for n in records.names) for r in array[:33]]
    assert records.read(array, 33) == expected
    assert records.read(array, 0) == []


def test_a_field_out_of_offset_order_falls_back_to_attributes() -> None:
    backwards = Records(pynvml.c_nvmlProcessInfo_v3_t, ("usedGpuMemory", "pid"))
    assert backwards.format is None
    array = _filled(pynvml.c_nvmlProcessInfo_v3_t, 3, seed=7)
    assert backwards.read(array, 3) == [(r.usedGpuMemory, r.pid) for r in array]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("records")
    scenario = """
driver_version: "580.95.05"
devices:
  - model: NVIDIA H100 80GB HBM3
processes:
  - {device: 0, used_memory_mib: 20000, sm_util: 45}
  - {device: 0, used_memory_mib: 1000, sm_util: 5}
  - {device: 0, used_memory_mib: 300, sm_util: 7}
"""
    with SimulatedNode.start(write_scenario(tmp, scenario), state_dir=tmp / "state") as n:
        yield n


def test_the_simulated_library_s_answers_read_the_same(node: SimulatedNode) -> None:
    out = run_client(node, """
        import ctypes
        from gpu_otel_agent.plugins.nvidia.processes import _INFO, _UTIL, _handshake, _function
        fn = _function("nvmlDeviceGetComputeRunningProcesses_v3")
        array, n = _handshake(lambda a, c: int(fn(h[0], ctypes.byref(c), a)), _INFO.structure)
        util = _function("nvmlDeviceGetProcessUtilization")
        time.sleep(1.2)  # a sample period: every process has a sample
        uarray, un = _handshake(lambda a, c: int(util(h[0], a, ctypes.byref(c),
                                                      ctypes.c_ulonglong(0))), _UTIL.structure)
        out = {"info": [list(r) for r in _INFO.read(array, n)],
               "info_attrs": [[getattr(r, f) for f in _INFO.names] for r in array[:n]],
               "util": [list(r) for r in _UTIL.read(uarray, un)],
               "util_attrs": [[getattr(r, f) for f in _UTIL.names] for r in uarray[:un]]}
    """)
    assert out["info"] == out["info_attrs"] and len(out["info"]) == 3
    assert sorted(r[1] for r in out["info"]) == [300 << 20, 1000 << 20, 20000 << 20]
    assert out["util"] == out["util_attrs"] and out["util"]
