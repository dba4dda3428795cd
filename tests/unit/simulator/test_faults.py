"""Chaos and fail requests: one parser for the scenario file and the control socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node.scenario import (
    ScenarioError,
    function_names,
    parse_scenario,
)
from gpu_otel_agent.simulation.nvidia.faults import (
    FaultSpecError,
    parse_chaos,
    parse_code,
    parse_fail,
)

FNS = function_names()


def test_chaos_round_trip_and_defaults() -> None:
    spec = parse_chaos({"seed": 7, "rate": 0.02, "slow_ms": {"rate": 0.01, "ms": 300}}, FNS, 2)
    assert (spec.seed, spec.rate, spec.slow_rate, spec.slow_ms) == (7, 0.02, 0.01, 300)
    assert spec.codes is None and spec.functions is None and spec.devices is None
    assert parse_chaos(spec.as_request(), FNS, 2) == spec
    listed = parse_chaos(
        {"rate": 1, "codes": ["UNKNOWN", 15, "NVML_ERROR_TIMEOUT"],
         "functions": "nvmlDeviceGetPowerUsage,nvmlDeviceGetFieldValues", "devices": [1]},
        FNS, 2,
    )
    assert listed.codes == (999, 15, 10)
    assert listed.functions == ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetFieldValues")
    assert listed.devices == (1,)
    assert parse_chaos({"off": True}, FNS, 2).off


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"seed": 1}, "rate: required"),
        ({"rate": 1.5}, "rate: expected a number"),
        ({"rate": 0.1, "codes": ["NVML_SUCCESS"]}, "not an NVML error code"),
        ({"rate": 0.1, "functions": ["nvmlNoSuch"]}, "functions:"),
        ({"rate": 0.1, "devices": [2]}, "devices:"),
        ({"rate": 0.1, "slow_ms": 300}, "slow_ms:"),
        ({"rate": 0.1, "bogus": 1}, "unknown key(s) bogus"),
        ({"off": True, "rate": 0.1}, "off: takes no other key"),
    ],
)
def test_chaos_errors(raw: dict[str, object], message: str) -> None:
    with pytest.raises(FaultSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_chaos(raw, FNS, 2)


def test_fail_forms() -> None:
    f = parse_fail({"device": 0, "function": "nvmlDeviceGetPowerUsage", "code": 999,
                    "count": 3}, FNS, 1)
    assert (f.device, f.function, f.code, f.count, f.field) == (
        0, "nvmlDeviceGetPowerUsage", 999, 3, None)
    field = parse_fail({"device": 0, "field": 61, "code": "TIMEOUT"}, FNS, 1)
    assert field.function == "nvmlDeviceGetFieldValues" and field.field == 61
    assert parse_fail({"off": True, "device": 0}, FNS, 1).off
    with pytest.raises(FaultSpecError, match="code: required"):
        parse_fail({"device": 0}, FNS, 1)
    with pytest.raises(FaultSpecError, match="field:"):
        parse_fail({"function": "nvmlDeviceGetPowerUsage", "field": 61, "code": 999}, FNS, 1)
    with pytest.raises(FaultSpecError, match="count:"):
        parse_fail({"code": 999, "count": 0}, FNS, 1)
    assert parse_code("reset_required") == 16


def test_scenario_chaos_and_timeline_forms(tmp_path: Path) -> None:
    sc = parse_scenario(
        """
devices:
  - model: NVIDIA H100 80GB HBM3
  - model: Tesla T4
chaos: {seed: 7, rate: 0.02, codes: documented, functions: all, devices: all,
        slow_ms: {rate: 0.01, ms: 300}}
timeline:
  - {at: 1s, device: 0, fail: {function: nvmlDeviceGetPowerUsage, code: 999, count: 2}}
  - {at: 2s, device: 1, fail: {field: 61, code: UNKNOWN}}
  - {at: 3s, chaos: {rate: 0.5, codes: [UNKNOWN]}}
  - {at: 4s, driver_reload: true}
  - {at: 5s, device: 1, reset_required: true}
  - {at: 6s, device: 1, reset: true}
  - {at: 7s, chaos: {off: true}}
""",
        tmp_path / "s.yaml",
    )
    assert sc.chaos is not None and sc.chaos["rate"] == 0.02
    assert [e.action for e in sc.timeline] == [
        "fail", "fail", "chaos", "driver_reload", "reset_required", "reset", "chaos"]
    assert sc.timeline[1].args["function"] == "nvmlDeviceGetFieldValues"
    with pytest.raises(ScenarioError, match=r"timeline\[0\].chaos: 'chaos' is node-wide"):
        parse_scenario(
            "devices: [{model: Tesla T4}]\ntimeline: [{at: 1s, device: 0, chaos: {rate: 1}}]\n",
            tmp_path / "b.yaml",
        )
    with pytest.raises(ScenarioError, match=r"s2.yaml:\d+: chaos: rate: expected"):
        parse_scenario("devices: [{model: Tesla T4}]\nchaos: {rate: 2}\n", tmp_path / "s2.yaml")
