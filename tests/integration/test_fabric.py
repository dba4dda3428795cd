"""The NVLink fabric end to end: the agent runs on the simulated GB200 NVL72 compute tray
(examples/scenarios/gb200-nvl72-tray.yaml), per-link NVLink errors and a fabric degradation are
injected at run time, and each arrives at a real OTLP receiver as the per-link series, the
fabric series and a ``gpu.degraded`` / ``gpu.healthy`` pair, with the values the node served.

Debounce is shortened through configuration (2 slow reads at 0.25 s), never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import LogEvent, Store

pytestmark = pytest.mark.integration

TRAY = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "gb200-nvl72-tray.yaml"
UUIDS = [f"GPU-00000000-0000-4000-8000-0000000000b{i}" for i in range(4)]
CONFIG = ("groups: {slow: {interval: 0.25}}\n"
          "health: {degrade_after: 2, clear_after: 2}\n")
FAST = ["--interval", "0.25", "--export-interval", "0.25"]


@pytest.fixture
def tray(tmp_path: Path) -> Iterator[SimulatedNode]:
    scenario = yaml.safe_load(TRAY.read_text(encoding="utf-8"))
    scenario.pop("timeline")  # faults are injected by the test, at its own pace
    for device, uuid in zip(scenario["devices"], UUIDS, strict=True):
        device["uuid"] = uuid
    path = tmp_path / "tray.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    with SimulatedNode.start(path, state_dir=tmp_path / "node") as node:
        yield node


def _agent(tmp_path: Path, node: SimulatedNode, receiver: OtlpGrpcReceiver) -> AgentProcess:
    path = tmp_path / "agent.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return AgentProcess(tmp_path, receiver.endpoint, node.env, ["--config", str(path), *FAST])


def _value(store: Store, metric: str, want: float, what: str, **attrs: object) -> None:
    store.wait_for(lambda s: (p := s.latest(metric, attrs)) is not None and p.value == want,
                   timeout=30, what=what)


def _event(store: Store, name: str, device: int, condition: str) -> LogEvent:
    return store.wait_for(
        lambda s: s.logs(name, {"hw.id": UUIDS[device], "gpu.health.condition": condition}),
        timeout=30, what=f"{name} {condition} on GPU {device}")[0]


def test_per_link_errors_arrive_by_link_and_name_the_link(
    tray: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    store = otlp_grpc_receiver.store
    agent = _agent(tmp_path, tray, otlp_grpc_receiver)
    try:
        # NVLink 5: 18 links per GPU, each at the 53.125 GB/s the scenario serves.
        store.wait_for(lambda s: len({p.attributes["gpu.nvlink.link"] for p in s.points(
            "gpu.nvlink.link.speed", {"hw.id": UUIDS[2]})}) == 18, timeout=30,
            what="18 link speeds")
        _value(store, "gpu.nvlink.link.speed", 53_125e6, "link 17 speed",
               **{"hw.id": UUIDS[2], "gpu.nvlink.link": 17})
        _value(store, "gpu.nvlink.link.errors", 0, "link 7 clean",
               **{"hw.id": UUIDS[2], "gpu.nvlink.link": 7, "error.type": "recovery"})
        tray.command({"op": "set", "device": 2, "values": {
            "nvlink.7.recovery_errors": 3, "nvlink.7.replay_errors": 12,
            "nvlink.11.crc_flit_errors": 40}})
        for link, kind, count in ((7, "recovery", 3), (7, "replay", 12), (11, "crc_flit", 40)):
            _value(store, "gpu.nvlink.link.errors", count, f"link {link} {kind}",
                   **{"hw.id": UUIDS[2], "gpu.nvlink.link": link, "error.type": kind})
        # the sum over links keeps its contract
        _value(store, "gpu.nvlink.errors", 3, "recovery total",
               **{"hw.id": UUIDS[2], "error.type": "recovery"})
        _value(store, "gpu.nvlink.link.errors", 0, "another GPU's link 7 untouched",
               **{"hw.id": UUIDS[1], "gpu.nvlink.link": 7, "error.type": "recovery"})
        degraded = _event(store, "gpu.degraded", 2, "nvlink_errors")
        reason = str(degraded.attributes["gpu.health.reason"])
        assert "link 7 recovery" in reason and "link 7 replay" in reason, reason
    finally:
        agent.shutdown()
        agent.close()


def test_a_fabric_degradation_arrives_as_series_and_events(
    tray: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    store = otlp_grpc_receiver.store
    agent = _agent(tmp_path, tray, otlp_grpc_receiver)
    try:
        for device in range(4):  # one clique of one cluster, registration completed
            _value(store, "gpu.fabric.status", 1, f"GPU {device} registered", **{
                "hw.id": UUIDS[device], "gpu.fabric.state": "completed",
                "gpu.fabric.clique.id": 4026,
                "gpu.fabric.cluster.uuid": "9c6f5af3-53bf-49b5-a436-b66766c413c3"})
        _value(store, "gpu.fabric.health", 1, "healthy", **{
            "hw.id": UUIDS[1], "gpu.fabric.health.summary": "healthy"})
        _value(store, "gpu.fabric.fault", 0, "route healthy", **{
            "hw.id": UUIDS[1], "gpu.fabric.fault.type": "route_unhealthy"})

        tray.command({"op": "fabric", "device": 1, "fabric": {
            "summary": "unhealthy", "health": {"route_unhealthy": True}}})
        _value(store, "gpu.fabric.fault", 1, "route unhealthy", **{
            "hw.id": UUIDS[1], "gpu.fabric.fault.type": "route_unhealthy"})
        _value(store, "gpu.fabric.health", 1, "unhealthy", **{
            "hw.id": UUIDS[1], "gpu.fabric.health.summary": "unhealthy"})
        degraded = _event(store, "gpu.degraded", 1, "fabric_unhealthy")
        assert degraded.attributes["gpu.health.subsystem"] == "nvlink"
        assert "route_unhealthy" in str(degraded.attributes["gpu.health.reason"])
        assert not store.logs("gpu.degraded", {"hw.id": UUIDS[0],
                                               "gpu.health.condition": "fabric_unhealthy"})

        tray.command({"op": "fabric", "device": 1, "fabric": {
            "summary": "healthy", "health": {"route_unhealthy": False}}})
        healthy = _event(store, "gpu.healthy", 1, "fabric_unhealthy")
        assert healthy.time_unix_nano >= degraded.time_unix_nano

        # A registration that completed with an error status is a failed one (DCGM's reading).
        tray.command({"op": "fabric", "device": 3, "fabric": {"status": 999}})
        _value(store, "gpu.fabric.status", 1, "GPU 3 failed", **{
            "hw.id": UUIDS[3], "gpu.fabric.state": "failed"})
        failed = _event(store, "gpu.degraded", 3, "fabric_unhealthy")
        assert "registration failed" in str(failed.attributes["gpu.health.reason"])
    finally:
        agent.shutdown()
        agent.close()
