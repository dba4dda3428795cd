"""The NVML error policy: one row per nvml.h code, its generated doc, bounded logging, backoff."""

from __future__ import annotations

import logging
from pathlib import Path

import pynvml
import pytest

from gpu_otel_agent.backends.protocol import DeviceLost, DeviceNeedsReset
from gpu_otel_agent.plugins.nvidia.backoff import FIRST_ENV, FIRST_S, Backoff, first_wait
from gpu_otel_agent.plugins.nvidia.error_log import ErrorCounts, ErrorLogLimiter
from gpu_otel_agent.plugins.nvidia.error_policy import BY_CODE, CODES, Policy, policy
from gpu_otel_agent.plugins.nvidia.nvml import NvmlUninitialized, Unavailable, classify
from gpu_otel_agent.simulation.nvidia import nvml_returns
from gpu_otel_agent.simulation.nvidia.error_policy_doc import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "nvml-error-policy.md"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_every_code_nvml_h_defines_has_exactly_one_row() -> None:
    # The reference is the enum extracted from nvml.h, not this table.
    defined = {name: value for name, value in nvml_returns.code_values().items()
               if name != "NVML_SUCCESS"}
    assert {row.name: row.code for row in CODES} == defined
    assert len(BY_CODE) == len(CODES)


@pytest.mark.parametrize(("code", "expected"), [
    (pynvml.NVML_ERROR_NOT_SUPPORTED, Unavailable),
    (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, Unavailable),
    (pynvml.NVML_ERROR_DEPRECATED, Unavailable),
    (pynvml.NVML_ERROR_GPU_IS_LOST, DeviceLost),
    (pynvml.NVML_ERROR_RESET_REQUIRED, DeviceNeedsReset),
    (pynvml.NVML_ERROR_UNINITIALIZED, NvmlUninitialized),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, NvmlUninitialized),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, NvmlUninitialized),
    # Before: NO_PERMISSION was Unavailable (off for good), RESET_REQUIRED a transient gap.
    (pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVMLError),
    (pynvml.NVML_ERROR_UNKNOWN, pynvml.NVMLError),
    (pynvml.NVML_ERROR_TIMEOUT, pynvml.NVMLError),
])
def test_classify_follows_the_table(code: int, expected: type[Exception]) -> None:
    result = classify(pynvml.NVMLError(code), "nvmlDeviceGetPowerUsage")
    assert type(result) is expected or (expected is pynvml.NVMLError
                                        and isinstance(result, pynvml.NVMLError))


def test_no_permission_is_backed_off_and_unknown_codes_are_transient() -> None:
    assert policy(pynvml.NVML_ERROR_NO_PERMISSION) is Policy.BACKOFF
    assert policy(12345) is Policy.TRANSIENT
    assert policy(pynvml.NVML_ERROR_NOT_FOUND) is Policy.TRANSIENT
    assert policy(pynvml.NVML_ERROR_NOT_FOUND, "nvmlDeviceGetHandleByUUID") is Policy.DEVICE_LOST


def test_generated_doc_is_committed() -> None:
    assert DOC.read_text() == render(), (
        "regenerate: python -m gpu_otel_agent.simulation.nvidia.error_policy_doc")


def test_doc_lists_the_calls_and_their_documented_codes() -> None:
    text = render()
    line = next(x for x in text.splitlines() if x.startswith("| `nvmlDeviceGetMemoryInfo_v2`"))
    cells = [c.strip() for c in line.split("|")[2:-1]]
    assert cells[0] == "INVALID_ARGUMENT, NOT_SUPPORTED"  # permanent
    assert cells[1] == "NO_PERMISSION"  # backoff
    assert cells[2] == "UNKNOWN"
    assert "| `nvmlEventSetWait_v2` |" in text and "| TIMEOUT |" in text  # normal answer


def test_errors_are_logged_once_then_summarised(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    limiter = ErrorLogLimiter(summary_s=60, clock=clock)
    counts = ErrorCounts("gpu 0", limiter)
    with caplog.at_level(logging.INFO, logger="gpu_otel_agent.plugins.nvidia.error_log"):
        for _ in range(500):
            counts.record("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_UNKNOWN)
            clock.now += 0.1  # 50 s: no summary yet
        assert len(caplog.records) == 1
        assert "NVML_ERROR_UNKNOWN" in caplog.records[0].getMessage()
        clock.now += 20
        counts.record("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_UNKNOWN)
        assert len(caplog.records) == 2
        assert "x500" in caplog.records[1].getMessage()
    assert counts.snapshot() == {("nvmlDeviceGetPowerUsage", "NVML_ERROR_UNKNOWN"): 501}


def test_backoff_doubles_to_its_cap_and_forgets_on_success() -> None:
    clock = Clock()
    backoff = Backoff(first_s=10, cap_s=35, clock=clock)
    assert backoff.due("x")
    assert [backoff.failed("x") for _ in range(4)] == [10, 20, 35, 35]
    assert not backoff.due("x")
    clock.now = 35
    assert backoff.due("x")
    backoff.succeeded("x")
    assert backoff.failed("x") == 10


@pytest.mark.parametrize(("value", "expected"), [
    (None, FIRST_S), ("2", 2.0), ("0.5", 0.5),
    ("0", FIRST_S), ("-1", FIRST_S), ("soon", FIRST_S), ("nan", FIRST_S), ("3600", FIRST_S),
])
def test_the_first_backoff_is_30_s_unless_the_environment_gives_seconds(
    value: str | None, expected: float,
) -> None:
    assert first_wait({} if value is None else {FIRST_ENV: value}) == expected
