"""Issue 28, section 2 (non-MIG), end to end: what the agent reads of the divergences fixed in
tests/integration/test_nvml_divergences.py arrives at a real OTLP receiver as the simulated
node served it: the instant power (not the 1 s average), replay rollovers, the clock-event
reason time, the maximum SM clock, remapped rows as a non-monotonic sum, a recovery action
that was pending before the agent started, and NVML's XID 999 named from the catalog.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
CONFIG = "groups: {slow: {interval: 0.25}}\n"


def test_divergences_arrive_as_the_node_served_them(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    devices = [
        h100(0, uuid=UUIDS[0], power_w=650, power_average_w=420, pcie_replay_rollover=3,
             violation_hw_thermal_ns=3e9, remapped_rows_correctable=5, max_sm_clock_mhz=1980),
        h100(1, uuid=UUIDS[1], recovery_action=2),  # pending before the agent starts, no event
    ]
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": devices})
    store = otlp_grpc_receiver.store
    config = tmp_path / "agent.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--config", str(config), *FAST])
        try:
            gpu0 = {"hw.id": UUIDS[0]}
            rows = {**gpu0, "error.type": "corrected"}
            store.wait_for(lambda s: s.latest("gpu.memory.row_remap.count", rows), timeout=30,
                           what="remapped rows")
            first = store.latest("gpu.memory.row_remap.count", rows)
            assert first is not None and (first.kind, first.monotonic) == ("sum", False)
            assert first.value == 5
            node.command({"op": "set", "device": 0, "values": {"remapped_rows_correctable": 3}})
            store.wait_for(lambda s: (p := s.latest("gpu.memory.row_remap.count", rows))
                           and p.value == 3, timeout=30, what="remapped rows down to 3")
            lower = store.latest("gpu.memory.row_remap.count", rows)
            assert lower is not None
            assert lower.start_time_unix_nano == first.start_time_unix_nano  # no restart

            power = store.latest("hw.power", gpu0)
            assert power is not None and power.value == 650  # the instant field, not 420
            rollovers = store.latest("gpu.pcie.replay_rollovers", gpu0)
            assert rollovers is not None and rollovers.value == 3 and rollovers.monotonic
            thermal = store.latest("gpu.violation.time",
                                   {**gpu0, "gpu.violation.policy": "hw_thermal_slowdown"})
            assert thermal is not None and thermal.value >= 3.0
            limit = store.latest("gpu.clock.limit", {**gpu0, "gpu.clock.domain": "sm"})
            assert limit is not None and limit.value == 1980e6
            assert store.latest("gpu.clock.application") is None

            store.wait_for(lambda s: (p := s.latest(
                "hw.status", {"hw.id": UUIDS[1], "hw.state": "failed"})) and p.value == 1,
                timeout=30, what="GPU 1 failed: the node reboot it was asked for before start")
            health = store.logs("gpu.health", {"hw.id": UUIDS[1]})
            assert any("node reboot" in str(e.attributes.get("gpu.health.reason"))
                       for e in health), [e.attributes for e in health]

            # nvml.h: "eventData is set as 999 for unknown Xid error": named from the catalog
            node.command({"op": "xid", "device": 0, "code": 999})
            store.wait_for(lambda s: s.logs("gpu.xid", {**gpu0, "gpu.xid.code": 999}),
                           timeout=30, what="XID 999")
            (xid,) = store.logs("gpu.xid", {**gpu0, "gpu.xid.code": 999})
            assert xid.attributes["gpu.xid.name"] == "UNKNOWN_XID"
            assert "kernel log" in xid.body
        finally:
            agent.shutdown()
            agent.close()
