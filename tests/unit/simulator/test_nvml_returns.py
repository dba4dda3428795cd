"""The committed nvml_returns.json is what the extraction makes of the installed nvml.h."""

from __future__ import annotations

import json

from gpu_otel_agent.simulation.nvidia import nvml_returns
from gpu_otel_agent.simulation.nvidia.build_nvml import find_nvml_header


def test_committed_file_matches_installed_header() -> None:
    committed = json.loads(nvml_returns.DATA.read_text())
    fresh = json.loads(nvml_returns.render(find_nvml_header()))
    assert committed == fresh, (
        "nvml_returns.json is stale: run python -m gpu_otel_agent.simulation.node."
        "nvml_returns"
    )


def test_known_entries_against_the_header_text() -> None:
    # Read by hand from nvml.h (NVML 13): nvmlDeviceGetPowerUsage's @return list.
    assert nvml_returns.documented("nvmlDeviceGetPowerUsage") == [
        "NVML_ERROR_UNINITIALIZED",
        "NVML_ERROR_INVALID_ARGUMENT",
        "NVML_ERROR_NOT_SUPPORTED",
        "NVML_ERROR_GPU_IS_LOST",
        "NVML_ERROR_UNKNOWN",
    ]
    # nvmlDeviceGetFieldValues documents SUCCESS ("check each value's nvmlReturn") and
    # INVALID_ARGUMENT only: a whole-call error there is never drawn at random.
    assert nvml_returns.documented("nvmlDeviceGetFieldValues") == ["NVML_ERROR_INVALID_ARGUMENT"]
    assert nvml_returns.injectable("nvmlDeviceGetFieldValues") == []
    # nvmlDeviceGetTemperature is only "@deprecated" in NVML 13: no list, no random errors.
    assert nvml_returns.documented("nvmlDeviceGetTemperature") == []
    text = find_nvml_header().read_text()
    handle = text[: text.index("nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex_v2(")]
    doc = handle[handle.rindex("/**"):]
    for code in nvml_returns.documented("nvmlDeviceGetHandleByIndex_v2"):
        assert f"\\ref {code}" in doc
    assert "NVML_ERROR_INSUFFICIENT_POWER" in nvml_returns.injectable("nvmlDeviceGetHandleByIndex")


def test_injectable_excludes_states_caller_errors_and_normal_answers() -> None:
    for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetComputeRunningProcesses_v3",
               "nvmlEventSetWait_v2", "nvmlDeviceGetProcessUtilization"):
        codes = nvml_returns.injectable(fn)
        assert codes, fn
        assert not set(codes) & set(nvml_returns.NOT_INJECTED), fn
        assert set(codes) <= set(nvml_returns.documented(fn))
    assert "NVML_ERROR_TIMEOUT" not in nvml_returns.injectable("nvmlEventSetWait_v2")
    assert "NVML_ERROR_NO_PERMISSION" in nvml_returns.injectable(
        "nvmlDeviceGetComputeRunningProcesses_v3"
    )


def test_code_values_come_from_the_enum() -> None:
    values = nvml_returns.code_values()
    assert values["NVML_ERROR_UNKNOWN"] == 999
    assert values["NVML_ERROR_RESET_REQUIRED"] == 16
    assert values["NVML_SUCCESS"] == 0


def test_gpm_calls_may_return_any_error() -> None:
    """nvml.h's GPM calls say "Nonzero NVML_ERROR_? enum on error" and list no code."""
    for name in ("nvmlGpmMetricsGet", "nvmlGpmSampleGet", "nvmlGpmMigSampleGet",
                 "nvmlGpmQueryDeviceSupport"):
        assert nvml_returns.may_return_any(name)
    assert not nvml_returns.may_return_any("nvmlGpmSampleAlloc")  # it lists its codes
    assert not nvml_returns.may_return_any("nvmlDeviceGetPowerUsage")
