"""The shipped example scenarios run end to end (users try the agent on them first)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import SCENARIOS, AgentProcess
from tests.receivers import decode
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.receivers.store import Store

pytestmark = pytest.mark.integration


def _uuid_of(store: Store, index: int) -> str:
    point = store.wait_for(
        lambda s: next((p for p in s.points("hw.power") if p.attributes["gpu.index"] == index),
                       None),
        timeout=15, what=f"GPU {index}",
    )
    return str(point.attributes["hw.id"])


def _exports(store: Store) -> list[list[Point]]:
    return [list(decode.points(r.request, r.received_at))  # type: ignore[arg-type]
            for r in store.received("metrics")]


def _powers(points: list[Point], uuid: str) -> list[Point]:
    return [p for p in points if p.metric == "hw.power" and p.attributes.get("hw.id") == uuid]


def _last_exports_say_only_the_a100_powers(store: Store, t4: str, a100: str) -> bool:
    last = _exports(store)[-2:]
    return len(last) == 2 and all(_powers(points, a100) and not _powers(points, t4)
                                  for points in last)


def test_mixed_node_older_driver_and_a_gpu_falling_off_the_bus(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    with SimulatedNode.start(SCENARIOS / "mixed-node.yaml", state_dir=tmp_path / "node") as node:
        started = time.monotonic()
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--interval", "0.5", "--export-interval", "0.5"])
        store = otlp_grpc_receiver.store
        try:
            a100, t4 = _uuid_of(store, 0), _uuid_of(store, 1)
            assert store.latest("hw.status", {"hw.id": t4, "hw.state": "ok"}).value == 1  # type: ignore[union-attr]
            # Older driver: no nvmlDeviceGetMemoryInfo_v2 (reserved absent), no GPM. Usage is
            # v1's figure there (it includes the reserve): present, never vanished.
            assert store.points("hw.gpu.memory.limit", {"hw.id": a100})
            assert store.points("hw.gpu.memory.usage", {"hw.id": a100})
            assert store.points("gpu.memory.reserved") == []
            assert store.points("gpu.sm.utilization") == []
            # The T4 has no memory temperature sensor; the A100 has one.
            memory = {"hw.sensor_location": "memory"}
            assert store.points("hw.temperature", {"hw.id": a100, **memory})
            assert store.points("hw.temperature", {"hw.id": t4, **memory}) == []
            # The timeline drops the T4 off the bus at 20.5 s.
            store.wait_for(
                lambda s: (p := s.latest("hw.status", {"hw.id": t4, "hw.state": "failed"}))
                and p.value == 1,
                timeout=40, what="T4 failed",
            )
            lost_after = time.monotonic() - started
            # Not in a window of seconds: the T4's power stops (the newest exports carry the
            # A100's alone), and no T4 reading exported was taken after the failure.
            store.wait_for(lambda s: _last_exports_say_only_the_a100_powers(s, t4, a100),
                           timeout=30, what="exports with the A100's power and not the T4's")
            failed_at = min(p.time_unix_nano for p in store.points(
                "hw.status", {"hw.id": t4, "hw.state": "failed"}) if p.value == 1)
            assert [p for p in store.points("hw.power", {"hw.id": t4})
                    if p.time_unix_nano > failed_at] == []
            assert lost_after > 15
        finally:
            agent.shutdown()
            agent.close()
        for missing in ("nvmlDeviceGetMemoryInfo_v2", "nvmlGpmQueryDeviceSupport"):
            assert agent.log().count(f"NVML function {missing} is not in this driver") == 1
