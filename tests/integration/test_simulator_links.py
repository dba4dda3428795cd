"""Link health on the simulated node (simulator.md "Link health"), read through real pynvml.

Each reading is checked against the NVML call nvml.h documents for it: per-link state
(nvmlDeviceGetNvLinkState and the NVML_FI_DEV_NVLINK_GET_STATE field with the link in scopeId),
per-link error counters (nvmlDeviceGetNvLinkErrorCounter, the per-link DL fields and the
*_ERROR_COUNT_TOTAL fields summed over links), PCIe current/max set at run time, and the
slowdown temperature threshold.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpu_otel_agent.simulation.node import SimCommandError, SimulatedNode
from tests.unit.simulator.simhelpers import run_client, write_scenario

pytestmark = [pytest.mark.integration, pytest.mark.harness]  # tests the simulated node

SCENARIO = """
devices:
  - model: NVIDIA H100 80GB HBM3
    temperature_slowdown_c: 87
    nvlink:
      - {state: up, crc_flit_errors: 5, replay_errors: 1, recovery_errors: 0}
      - {state: down}
  - model: Tesla T4
"""

READ = """
d = h[0]
S = N.NVML_FI_DEV_NVLINK_GET_STATE
fv = N.nvmlDeviceGetFieldValues(d, [(S, 0), (S, 1), (S, 3), (S, 18),
                                    (N.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 0),
                                    (N.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, 0),
                                    (N.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 0),
                                    (N.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 3)])
out = {
    "state": [N.nvmlDeviceGetNvLinkState(d, link) for link in (0, 1, 3)],
    "counters": [N.nvmlDeviceGetNvLinkErrorCounter(d, 3, c) for c in (
        N.NVML_NVLINK_ERROR_DL_CRC_FLIT, N.NVML_NVLINK_ERROR_DL_REPLAY,
        N.NVML_NVLINK_ERROR_DL_RECOVERY)],
    "fields": [(f.nvmlReturn, f.value.uiVal if i < 4 else f.value.ullVal)
               for i, f in enumerate(fv)],
    "link18": err(N.nvmlDeviceGetNvLinkState, d, 18),
    "t4": err(N.nvmlDeviceGetNvLinkState, h[1], 0),
    "pcie": [N.nvmlDeviceGetCurrPcieLinkGeneration(d), N.nvmlDeviceGetMaxPcieLinkGeneration(d),
             N.nvmlDeviceGetCurrPcieLinkWidth(d), N.nvmlDeviceGetMaxPcieLinkWidth(d)],
    "slowdown": N.nvmlDeviceGetTemperatureThreshold(d, N.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
    "shutdown": N.nvmlDeviceGetTemperatureThreshold(d, N.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
    "app": N.nvmlDeviceGetApplicationsClock(d, N.NVML_CLOCK_SM),
}
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedNode]:
    tmp = tmp_path_factory.mktemp("links")
    with SimulatedNode.start(write_scenario(tmp, SCENARIO), state_dir=tmp / "state") as n:
        yield n


def test_links_from_the_scenario_and_set_at_run_time(node: SimulatedNode) -> None:
    before = run_client(node, READ)
    assert before["state"] == [1, 0, 1]  # NVML_FEATURE_ENABLED / DISABLED
    assert before["counters"] == [0, 0, 0]
    ok, invalid = 0, 2  # NVML_SUCCESS, NVML_ERROR_INVALID_ARGUMENT
    # NVML_NVLINK_STATE_ACTIVE = 1, INACTIVE = 0; the H100 has 18 links (0-17)
    assert before["fields"][:3] == [[ok, 1], [ok, 0], [ok, 1]]
    assert before["fields"][3][0] == invalid
    assert before["fields"][4:7] == [[ok, 5], [ok, 1], [ok, 0]]  # totals over links
    assert before["link18"] == "NVMLError_InvalidArgument"
    assert before["t4"] == "NVMLError_NotSupported"  # a model without NVLink
    assert before["pcie"] == [5, 5, 16, 16]
    assert before["slowdown"] == 87 and before["shutdown"] > 87
    assert before["app"] > 0

    node.command({"op": "set", "device": 0, "values": {
        "nvlink.3.state": "down", "nvlink.3.crc_flit_errors": 120, "nvlink.3.replay_errors": 2,
        "nvlink.1.state": "up", "pcie_link_width": 8, "pcie_link_gen": 4}})
    after = run_client(node, READ)
    assert after["state"] == [1, 1, 0]
    assert after["counters"] == [120, 2, 0]
    assert after["fields"][2] == [ok, 0]
    assert after["fields"][4:8] == [[ok, 125], [ok, 3], [ok, 0], [ok, 120]]
    assert after["pcie"] == [4, 5, 8, 16]


def test_bad_link_settings_are_refused_and_change_nothing(node: SimulatedNode) -> None:
    for values in ({"nvlink.3.state": "sideways"}, {"nvlink.99.state": "down"},
                   {"nvlink.2.crc_flit_errors": -1}, {"nvlink.2.colour": 1}):
        with pytest.raises(SimCommandError):
            node.command({"op": "set", "device": 0, "values": values})
    assert run_client(node, "out = N.nvmlDeviceGetNvLinkState(h[0], 2)") == 1
