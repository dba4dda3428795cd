"""The agent under NVML chaos: errors drawn from nvml.h's @return lists at 5 %, seeded.

Asserts properties, not speeds: the agent stays up, every GPU keeps exporting, every exported
value is one the node served (constant, distinct readings per GPU: a wrong or mixed-up value
shows), counters never step back within a series, the agent counted at least the errors the
node injected (per function and code), and chaos does not multiply NVML calls per cycle.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
GPUS = 4
CHAOS_S = 20.0
MIB = 1024 * 1024


def _readings(i: int) -> dict[str, object]:
    return {"power_w": 300 + 10 * i, "temperature_c": 50 + i, "memory_temperature_c": 60 + i,
            "utilization_gpu": 40 + i, "utilization_memory": 20 + i,
            "memory_used_mib": 1000 + i, "sm_clock_mhz": 1900 + i, "power_limit_w": 700 - i}


def _served(i: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What GPU ``i`` serves, in the contract's units (the only values it may export)."""
    r = _readings(i)
    return {
        ("hw.power", ()): float(r["power_w"]),  # type: ignore[arg-type]
        ("hw.temperature", (("hw.sensor_location", "gpu"),)): float(r["temperature_c"]),  # type: ignore[arg-type]
        ("hw.temperature", (("hw.sensor_location", "memory"),)):
            float(r["memory_temperature_c"]),  # type: ignore[arg-type]
        ("hw.gpu.utilization", (("hw.gpu.task", "general"),)):
            int(r["utilization_gpu"]) / 100,  # type: ignore[call-overload]
        ("gpu.memory.controller.utilization", ()): int(r["utilization_memory"]) / 100,  # type: ignore[call-overload]
        ("hw.gpu.memory.usage", ()): float(int(r["memory_used_mib"]) * MIB),  # type: ignore[call-overload]
        ("gpu.clock.frequency", (("gpu.clock.domain", "sm"),)):
            float(int(r["sm_clock_mhz"]) * 1_000_000),  # type: ignore[call-overload]
        ("gpu.power.limit", ()): float(r["power_limit_w"]),  # type: ignore[arg-type]
    }


def _key(point: Point, extra: tuple[str, ...]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return point.metric, tuple((k, str(point.attributes[k])) for k in extra
                               if k in point.attributes)




def _injected(chaos: Mapping[str, object]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    by_function = chaos["injected"]
    assert isinstance(by_function, Mapping)
    for function, codes in by_function.items():
        assert isinstance(codes, Mapping)
        for code, n in codes.items():
            # nvmlGpmSampleGet runs inside the agent's nvmlGpmMetricsGet step (one wrapper).
            name = "nvmlGpmMetricsGet" if function == "nvmlGpmSampleGet" else str(function)
            out[(name, str(code))] += int(n)
    fields = chaos["field_injected"]
    assert isinstance(fields, Mapping)
    for field_id, codes in fields.items():
        assert isinstance(codes, Mapping)
        for code, n in codes.items():
            out[(f"nvmlDeviceGetFieldValues/{field_id}", str(code))] += int(n)
    return dict(out)


def _calls_and_cycles(node: SimulatedNode, store: Store) -> tuple[int, float]:
    calls = node.stats()["calls"]
    assert isinstance(calls, Mapping)
    cycles = store.latest_values("gpu_agent.cycles.completed", "hw.id")
    return sum(int(n) for n in calls.values()), sum(cycles.values())


def test_agent_under_nvml_chaos(otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path) -> None:
    devices = [h100(i, uuid=UUIDS[i], **_readings(i)) for i in range(GPUS)]
    scenario = write_scenario(tmp_path, {"devices": devices})
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {slow: {interval: 0.5}, processes: {interval: 0.5}}\n")
    store = otlp_grpc_receiver.store
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--config", str(config), "--interval", "0.25",
                              "--export-interval", "0.5"])
        try:
            store.wait_for(lambda s: all(s.points("hw.power", {"hw.id": u})
                                         for u in UUIDS[:GPUS])
                           and s.points("gpu_agent.cycles.completed"), timeout=60)
            # The well-behaved baseline: NVML calls per sampling cycle.
            calls0, cycles0 = _calls_and_cycles(node, store)
            time.sleep(3)
            calls1, cycles1 = _calls_and_cycles(node, store)
            calm_per_cycle = (calls1 - calls0) / max(cycles1 - cycles0, 1)

            node.command({"op": "chaos", "rate": 0.05, "seed": 7})
            calls2, cycles2 = _calls_and_cycles(node, store)
            time.sleep(CHAOS_S)
            assert agent.process.poll() is None, agent.log()[-4000:]
            # Every GPU still exports, fresh points from the last seconds of chaos.
            recent = time.time() - 3
            for uuid in UUIDS[:GPUS]:
                assert [p for p in store.points("hw.power", {"hw.id": uuid})
                        if p.received_at >= recent], f"{uuid} stopped exporting"
            calls3, cycles3 = _calls_and_cycles(node, store)
            chaos_per_cycle = (calls3 - calls2) / max(cycles3 - cycles2, 1)
            node.command({"op": "chaos", "off": True})
            stats = node.stats()["chaos"]
            assert isinstance(stats, Mapping)
            injected = _injected(stats)
            # Let the agent export what it counted up to now (eventual, generous deadline).
            total = sum(injected.values())
            store.wait_for(lambda s: sum(s.latest_values("gpu_agent.library.errors",
                                                 "gpu_agent.call", "error.type").values())
                           >= total, timeout=30)
            assert agent.process.poll() is None
        finally:
            agent.terminate()
            agent.close()

    counted = store.latest_values("gpu_agent.library.errors", "gpu_agent.call", "error.type")
    print(f"injected {total} ({len(injected)} function/code pairs), counted "
          f"{sum(counted.values()):g}; NVML calls per cycle: calm {calm_per_cycle:.2f}, "
          f"chaos {chaos_per_cycle:.2f}")
    assert total > 50, "chaos injected too little to test anything"
    # Each injected error was seen and counted, per function and code.
    short = {key: n for key, n in injected.items() if counted.get(key, 0) < n}
    assert not short, f"injected but not counted: {short}"

    # Every exported value is one the node served, on the GPU that served it.
    wrong = []
    for i, uuid in enumerate(UUIDS[:GPUS]):
        served = _served(i)
        for (metric, attrs), value in served.items():
            extra = tuple(k for k, _ in attrs)
            points = [p for p in store.points(metric, {"hw.id": uuid})
                      if _key(p, extra) == (metric, attrs)]
            assert points, f"{metric}{attrs} never exported for {uuid}"
            wrong += [(uuid, metric, attrs, p.value) for p in points if p.value != value]
    assert not wrong, wrong[:10]

    # Counters never step back within a series (a restart would carry a new start time).
    for metric in ("hw.energy", "gpu.pcie.replay", "hw.errors", "hw.gpu.io"):
        series: dict[tuple[object, ...], list[Point]] = defaultdict(list)
        for p in store.points(metric):
            series[(tuple(sorted(p.attributes.items())), p.start_time_unix_nano)].append(p)
        for key, points in series.items():
            points.sort(key=lambda p: p.time_unix_nano)
            steps = [b.value - a.value for a, b in itertools.pairwise(points)]
            assert min(steps, default=0) >= 0, (metric, key)
    # No retry storm: chaos does not multiply the calls per cycle (generous margin).
    assert chaos_per_cycle <= calm_per_cycle * 1.25, (calm_per_cycle, chaos_per_cycle)


def test_driver_reload_and_gpu_reset_restart_counters_and_keep_series(
        otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path) -> None:
    devices = [h100(i, uuid=UUIDS[i], **_readings(i)) for i in range(2)]
    scenario = write_scenario(tmp_path, {"devices": devices})
    store = otlp_grpc_receiver.store
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--interval", "0.25", "--export-interval", "0.25"])
        try:
            def energy(uuid: str) -> list[Point]:
                return sorted(store.points("hw.energy", {"hw.id": uuid}),
                              key=lambda p: p.time_unix_nano)

            store.wait_for(lambda s: all(len(energy(u)) >= 3 for u in UUIDS[:2]), timeout=60)
            first_start = {u: energy(u)[-1].start_time_unix_nano for u in UUIDS[:2]}
            node.command({"op": "driver_reload"})
            # Both GPUs come back under their UUIDs, each energy series with a new start.
            for uuid in UUIDS[:2]:
                store.wait_for(lambda s, u=uuid: energy(u)[-1].start_time_unix_nano
                               != first_start[u], timeout=30)
            second_start = {u: energy(u)[-1].start_time_unix_nano for u in UUIDS[:2]}
            # A restart is seen as a drop below the last value read: let the counter grow
            # well past what it regains within one read interval (about 75 J at 301 W).
            store.wait_for(lambda s: energy(UUIDS[1])[-1].value > 600, timeout=30)
            node.command({"op": "reset", "device": 1})
            store.wait_for(lambda s: energy(UUIDS[1])[-1].start_time_unix_nano
                           != second_start[UUIDS[1]], timeout=30)
            time.sleep(1)  # GPU 0 was not reset: its series must not restart meanwhile
            assert energy(UUIDS[0])[-1].start_time_unix_nano == second_start[UUIDS[0]]
            assert agent.process.poll() is None
            assert "re-initialised" in agent.log()
        finally:
            agent.terminate()
            agent.close()
    for uuid in UUIDS[:2]:
        by_start: dict[int, list[Point]] = defaultdict(list)
        for p in energy(uuid):
            by_start[p.start_time_unix_nano].append(p)
        for points in by_start.values():  # no step back within a series
            assert all(b.value >= a.value for a, b in itertools.pairwise(points))
        starts = sorted(by_start)
        for before, after in itertools.pairwise(starts):
            # A new series starts after the last point of the one before it.
            assert after > max(p.time_unix_nano for p in by_start[before])
