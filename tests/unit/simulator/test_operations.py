"""One table of the simulator's operations (``operations.py``) and the four places that read it:
each covers exactly the table's rows, and a command line becomes the request its row names."""

from __future__ import annotations

import argparse
import re

import pytest

from gpu_otel_agent.simulation import sim_runner
from gpu_otel_agent.simulation.node import daemon, scenario
from gpu_otel_agent.simulation.operations import BY_COMMAND, BY_TIMELINE_KEY, OPERATIONS, Device
from gpu_otel_agent.simulation.sim_commands import add_sim_commands


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_sim_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["sim", *argv])


def test_every_operation_has_a_handler_and_no_handler_lacks_a_row() -> None:
    assert set(daemon.HANDLERS) == {op.name for op in OPERATIONS}


def test_every_schedulable_operation_is_validated_and_nothing_else() -> None:
    assert set(scenario.TIMELINE_ARGS) == {op.name for op in BY_TIMELINE_KEY.values()}


def test_every_command_builds_a_request_and_nothing_else() -> None:
    assert set(sim_runner.REQUESTS) == {op.name for op in BY_COMMAND.values()}


@pytest.mark.parametrize("command", sorted(BY_COMMAND))
def test_every_command_of_the_table_is_on_the_command_line(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse([*command.split(), "--help"])
    assert exit_.value.code == 0
    wants_device = BY_COMMAND[command].device is not Device.NONE
    assert bool(re.search(r"--device\b", capsys.readouterr().out)) == wants_device


@pytest.mark.parametrize(("argv", "request_"), [
    (["hang", "--device", "1", "--ms", "250"], {"op": "hang", "device": 1, "ms": 250}),
    (["proc", "rm", "--pid", "7"], {"op": "proc_rm", "device": None, "pid": 7}),
    (["proc", "add", "--device", "0", "--pid", "9", "--mig", "1"],
     {"op": "proc_add", "device": 0, "pid": 9, "used_memory_mib": 0.0, "sm_util": 0.0,
      "mem_util": 0.0, "type": "compute", "mig": 1}),
    (["driver-reload"], {"op": "driver_reload"}),
    (["reset-required", "--device", "2", "--off"],
     {"op": "reset_required", "device": 2, "on": False}),
    (["fail", "--function", "nvmlDeviceGetPowerUsage", "--code", "999"],
     {"op": "fail", "device": None, "function": "nvmlDeviceGetPowerUsage", "code": 999}),
    (["set", "--device", "0", "power_w=12.5", "name=x"],
     {"op": "set", "device": 0, "values": {"power_w": 12.5, "name": "x"}}),
])
def test_a_command_becomes_its_rows_request(argv: list[str], request_: dict[str, object]) -> None:
    assert sim_runner._request(_parse(argv)) == request_


def test_a_device_wide_command_needs_its_device() -> None:
    with pytest.raises(SystemExit):
        _parse(["hang", "--ms", "1"])


def test_a_timeline_hang_is_the_hang_operation() -> None:
    sc = scenario.parse_scenario(
        "devices: [{model: NVIDIA A100-SXM4-80GB}]\n"
        "timeline:\n  - {at: 1s, device: 0, hang_ms: 20}\n  - {at: 2s, chaos: {rate: 0.5}}\n",
        scenario.Path("t.yaml"))
    assert (sc.timeline[0].action, dict(sc.timeline[0].args)) == ("hang", {"ms": 20})
    assert sc.timeline[1].device is None
