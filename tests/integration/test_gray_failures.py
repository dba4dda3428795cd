"""Gray failures end to end: each condition raised and cleared on the simulated node at run
time arrives at a real OTLP receiver as ``gpu.degraded`` / ``gpu.healthy`` with its subsystem
and reason, and in ``gpu.health.status`` / ``hw.status``; an idle GPU that lowers its PCIe link
raises nothing; a temperature oscillating at the thermal threshold raises once and never flaps.

Debounce is shortened through configuration (2 slow reads at 0.25 s), never by sleeping.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import LogEvent, Store

pytestmark = pytest.mark.integration
CONFIG = ("groups: {slow: {interval: 0.25}}\n"
          "health: {degrade_after: 2, clear_after: 2}\n")
FAST = ["--interval", "0.25", "--export-interval", "0.25"]

# (device, settings that raise, settings that clear, condition, subsystem, words in the reason)
ROUNDS: tuple[tuple[tuple[int, dict[str, object], dict[str, object], str, str, str], ...],
              ...] = (
    ((0, {"pcie_link_width": 8}, {"pcie_link_width": 16}, "pcie_link_width", "pcie", "x8 of x16"),
     (1, {"nvlink.3.state": "down"}, {"nvlink.3.state": "up"}, "nvlink_link_down", "nvlink",
      "link(s) 3 down of 18"),
     (2, {"nvlink.5.crc_flit_errors": 10_000_000}, {}, "nvlink_errors", "nvlink", "CRC flit"),
     (3, {"temperature_c": 86}, {"temperature_c": 50}, "thermal_margin", "thermal",
      "4 C below its slowdown threshold 90 C")),
    ((0, {"pcie_replay_counter": 100_000}, {}, "pcie_replay_rate", "pcie", "expected at most"),
     (1, {"ecc_sbe_volatile": 100_000}, {}, "ecc_corrected_rate", "memory", "corrected ECC"),
     (2, {"clocks_event_reasons": 0x8}, {"clocks_event_reasons": 0}, "hw_slowdown", "sm",
      "HW slowdown"),
     (3, {"clocks_event_reasons": 0x80}, {"clocks_event_reasons": 0}, "power_brake", "power",
      "power brake")),
    ((0, {"sm_clock_mhz": 900, "clocks_event_reasons": 0}, {"sm_clock_mhz": 1980},
      "sm_clock_low", "sm", "45% of its maximum"),
     (1, {"power_w": 520}, {"power_w": 300}, "sibling_power", "power", "busy NVIDIA H100"),
     (2, {"remapped_rows_pending": 1}, {"remapped_rows_pending": 0}, "row_remap_pending",
      "memory", "remapped rows pending")),
)


def _agent(tmp_path: Path, node: SimulatedNode, receiver: OtlpGrpcReceiver) -> AgentProcess:
    path = tmp_path / "agent.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return AgentProcess(tmp_path, receiver.endpoint, node.env, ["--config", str(path), *FAST])


def _event(store: Store, name: str, device: int, condition: str) -> LogEvent:
    found = store.wait_for(
        lambda s: s.logs(name, {"hw.id": UUIDS[device], "gpu.health.condition": condition}),
        timeout=20, what=f"{name} {condition} on GPU {device}")
    return found[0]


def _status(store: Store, device: int, subsystem: str, state: str) -> None:
    store.wait_for(lambda s: (p := s.latest("gpu.health.status", {
        "hw.id": UUIDS[device], "gpu.health.subsystem": subsystem, "hw.state": state}))
        and p.value == 1, timeout=20, what=f"gpu.health.status {subsystem} {state}")


def _cycles(store: Store, device: int) -> float:
    point = store.latest("gpu_agent.cycles.completed", {"hw.id": UUIDS[device]})
    return point.value if point else 0.0


def _wait_cycles(store: Store, device: int, count: int) -> None:
    """Progress, not time: ``count`` more group reads of the device reached the receiver."""
    start = _cycles(store, device)
    store.wait_for(lambda s: _cycles(s, device) >= start + count, timeout=60,
                   what=f"{count} more reads of GPU {device}")


def test_each_condition_raised_and_cleared_at_run_time(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, store = four_gpu_node, otlp_grpc_receiver.store
    for device in range(4):  # under load: the conditions that need it can judge
        node.command({"op": "set", "device": device, "values": {"utilization_gpu": 90}})
    agent = _agent(tmp_path, node, otlp_grpc_receiver)
    try:
        store.wait_for(lambda s: len({p.attributes["hw.id"] for p in
                                      s.points("gpu.nvlink.link.state")}) == 4, timeout=30)
        for device in range(4):
            _status(store, device, "pcie", "ok")
        for conditions in ROUNDS:
            for device, raise_, _, _, _, _ in conditions:
                node.command({"op": "set", "device": device, "values": raise_})
            for device, _, _, condition, subsystem, words in conditions:
                degraded = _event(store, "gpu.degraded", device, condition)
                attrs = degraded.attributes
                assert attrs["gpu.health.subsystem"] == subsystem
                assert words in str(attrs["gpu.health.reason"]), attrs["gpu.health.reason"]
                assert degraded.severity_text == "WARN" and subsystem in degraded.body
                _status(store, device, subsystem, "degraded")
                store.wait_for(lambda s, d=device: (p := s.latest(
                    "hw.status", {"hw.id": UUIDS[d], "hw.state": "degraded"})) and p.value == 1,
                    timeout=20, what="hw.status degraded")
            for device, _, clear, _, _, _ in conditions:
                if clear:  # counters that stop rising clear on their own
                    node.command({"op": "set", "device": device, "values": clear})
            for device, _, _, condition, subsystem, _ in conditions:
                healthy = _event(store, "gpu.healthy", device, condition)
                assert healthy.attributes["gpu.health.subsystem"] == subsystem
                assert healthy.time_unix_nano >= _event(
                    store, "gpu.degraded", device, condition).time_unix_nano
        for device in range(4):
            _status(store, device, "pcie", "ok")
            store.wait_for(lambda s, d=device: (p := s.latest(
                "hw.status", {"hw.id": UUIDS[d], "hw.state": "ok"})) and p.value == 1,
                timeout=20, what=f"GPU {device} ok again")
        # The low SM clock made GPU 0 slower than its three siblings too.
        sibling = _event(store, "gpu.degraded", 0, "sibling_sm_clock")
        assert "of the median 1980 MHz of 3 busy" in str(sibling.attributes["gpu.health.reason"])
    finally:
        agent.shutdown()
        agent.close()
    for name in ("gpu.degraded", "gpu.healthy"):  # each condition once each way: no flapping
        seen = [(e.attributes["hw.id"], e.attributes["gpu.health.condition"])
                for e in store.logs(name)]
        assert len(seen) == len(set(seen)), seen


def test_idle_link_slowdown_is_quiet_and_an_oscillating_temperature_does_not_flap(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, store = four_gpu_node, otlp_grpc_receiver.store
    # GPU 0 idle on a gen-1 x4 link (power saving); GPU 1 at the thermal threshold, +-1.5 C.
    node.command({"op": "set", "device": 0, "values": {
        "utilization_gpu": 0, "pcie_link_gen": 1, "pcie_link_width": 4}})
    node.command({"op": "set", "device": 1, "values": {
        "temperature_c": {"sine": {"min": 83.5, "max": 86.5, "period_s": 1.0}}}})
    agent = _agent(tmp_path, node, otlp_grpc_receiver)
    try:
        _event(store, "gpu.degraded", 1, "thermal_margin")
        store.wait_for(lambda s: s.latest("gpu.pcie.link.generation", {"hw.id": UUIDS[0]}),
                       timeout=20)
        _wait_cycles(store, 0, 40)  # ~10 s of reads at a 0.25 s interval, each one judged
        _wait_cycles(store, 1, 40)  # the temperature crossed 85 C many times over
        assert store.latest("gpu.pcie.link.generation", {"hw.id": UUIDS[0]}).value == 1
        assert not store.logs("gpu.degraded", {"hw.id": UUIDS[0]})
        assert len(store.logs("gpu.degraded", {"hw.id": UUIDS[1]})) == 1
        assert not store.logs("gpu.healthy", {"hw.id": UUIDS[1]})
        # Busy on the same link: now it is a link that trained down.
        node.command({"op": "set", "device": 0, "values": {"utilization_gpu": 90}})
        degraded = _event(store, "gpu.degraded", 0, "pcie_link_generation")
        assert "gen 1 of gen 5 under load" in str(degraded.attributes["gpu.health.reason"])
        _event(store, "gpu.degraded", 0, "pcie_link_width")
    finally:
        agent.shutdown()
        agent.close()


def test_an_amd_pcie_link_that_trained_down_is_the_same_gray_failure(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """amdsmi's pcie_width / max_pcie_width through the simulated libamd_smi.so: the PCIe
    conditions are vendor-neutral, read from the same metric names."""
    scenario = write_scenario(tmp_path, {"devices": [
        {"vendor": "amd", "model": "AMD Instinct MI300X", "utilization_gpu": 90}]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = _agent(tmp_path, node, otlp_grpc_receiver)
        store = otlp_grpc_receiver.store
        try:
            store.wait_for(lambda s: s.latest("gpu.pcie.link.max_width"), timeout=30)
            assert store.latest("gpu.pcie.link.max_generation").value == 5  # 32 GT/s
            node.command({"op": "set", "device": 0, "values": {"pcie_link_width": 8}})
            (degraded,) = store.wait_for(lambda s: s.logs("gpu.degraded"), timeout=20)
            assert degraded.attributes["hw.vendor"] == "AMD"
            assert degraded.attributes["gpu.health.condition"] == "pcie_link_width"
            assert degraded.attributes["gpu.health.reason"] == "PCIe link width x8 of x16 " \
                "under load"
            node.command({"op": "set", "device": 0, "values": {"pcie_link_width": 16}})
            store.wait_for(lambda s: s.logs("gpu.healthy"), timeout=20)
        finally:
            agent.shutdown()
            agent.close()


def test_a_mig_h100_with_a_busy_instance_is_judged_on_its_pcie_link(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """A MIG-enabled GPU has no utilization of its own; its load is its instances' GPM SM
    activity, served per instance by the simulated nvmlGpmMigSampleGet."""
    scenario = write_scenario(tmp_path, {"devices": [
        {"model": "NVIDIA H100 80GB HBM3", "uuid": UUIDS[0],
         "mig": [{"profile": "3g.40gb", "sm_active": 90}, {"profile": "3g.40gb"}]}]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = _agent(tmp_path, node, otlp_grpc_receiver)
        store = otlp_grpc_receiver.store
        try:
            store.wait_for(lambda s: s.points("gpu.sm.utilization"), timeout=30,
                           what="GPM SM activity of the instances")
            node.command({"op": "set", "device": 0, "values": {"pcie_link_width": 8}})
            degraded = _event(store, "gpu.degraded", 0, "pcie_link_width")
            assert degraded.attributes["gpu.health.reason"] == "PCIe link width x8 of x16 " \
                "under load"
            node.command({"op": "set", "device": 0, "values": {"pcie_link_width": 16}})
            _event(store, "gpu.healthy", 0, "pcie_link_width")
        finally:
            agent.shutdown()
            agent.close()
