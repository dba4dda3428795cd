"""NVML's size handshake for process lists, against a list that grows between the calls."""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml
import pytest

from gpu_otel_agent.plugins.nvidia.processes import HANDSHAKE_TRIES, HEADROOM, _handshake


class GrowingList:
    """Behaves like nvmlDevice*RunningProcesses: ``grow`` processes start after each of the
    first ``bursts`` calls."""

    def __init__(self, start: int, grow: int, bursts: int = 1_000_000) -> None:
        self.count = start
        self.grow = grow
        self.bursts = bursts
        self.calls = 0

    def __call__(self, array: Any, count: ctypes.c_uint) -> int:
        self.calls += 1
        n = self.count
        if self.calls <= self.bursts:
            self.count += self.grow
        if array is None or count.value < n:
            count.value = n
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE if n else pynvml.NVML_SUCCESS
        for i in range(n):
            array[i].pid = 1000 + i
        count.value = n
        return pynvml.NVML_SUCCESS


def _sized_call(name: str, fake: GrowingList, struct: type[ctypes.Structure]) -> list[Any]:
    array, count = _handshake(fake, struct)
    return list(array[:count]) if count else []


def test_empty_list_is_one_call() -> None:
    fake = GrowingList(0, 0)
    assert _sized_call("f", fake, pynvml.c_nvmlProcessInfo_v3_t) == []
    assert fake.calls == 1


def test_growth_within_the_headroom_needs_no_retry() -> None:
    fake = GrowingList(5, HEADROOM)
    found = _sized_call("f", fake, pynvml.c_nvmlProcessInfo_v3_t)
    assert [p.pid for p in found] == [1000 + i for i in range(5 + HEADROOM)]
    assert fake.calls == 2


def test_growth_beyond_the_headroom_is_retried() -> None:
    fake = GrowingList(5, HEADROOM * 3, bursts=2)  # a burst of starts during the handshake
    found = _sized_call("f", fake, pynvml.c_nvmlProcessInfo_v3_t)
    assert len(found) == 5 + 2 * HEADROOM * 3 and fake.calls == 4


def test_a_list_that_never_settles_is_an_error_not_a_loop() -> None:
    fake = GrowingList(5, 10_000)
    with pytest.raises(pynvml.NVMLError):
        _sized_call("f", fake, pynvml.c_nvmlProcessInfo_v3_t)
    assert fake.calls == 1 + HANDSHAKE_TRIES
