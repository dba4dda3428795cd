"""Values the simulated node serves arrive at real OTLP receivers, in the contract's units."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.receivers.rotel import RotelReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
FAST = ["--interval", "0.2", "--export-interval", "0.3"]


@pytest.fixture
def served(four_gpu_node: SimulatedNode) -> Iterator[SimulatedNode]:
    four_gpu_node.command(
        {"op": "set", "device": 2, "values": {
            "utilization_gpu": 37, "power_w": 512.5, "memory_used_mib": 40000,
            "temperature_c": 61, "memory_temperature_c": 70, "sm_clock_mhz": 1980,
            "memory_clock_mhz": 2619}}
    )
    yield four_gpu_node


def _value(store: Store, metric: str, **attrs: object) -> float | int:
    wanted = {"hw.id": UUIDS[2], **{k.replace("__", "."): v for k, v in attrs.items()}}
    point = store.wait_for(lambda s: s.latest(metric, wanted), timeout=15, what=metric)
    return point.value


def _assert_served_values(store: Store) -> None:
    assert store.wait_for(
        lambda s: (p := s.latest("hw.gpu.utilization",
                         {"hw.id": UUIDS[2], "hw.gpu.task": "general"}))
        and p.value == pytest.approx(0.37) and p,
        timeout=15, what="utilization 0.37 on GPU 2",
    )
    assert _value(store, "hw.power") == pytest.approx(512.5)  # mW -> W
    assert _value(store, "hw.gpu.memory.usage") == 40000 * MIB  # MiB -> By
    assert _value(store, "hw.gpu.memory.limit") == 81559 * MIB
    # The conventions' "fraction of GPU memory used", not the memory controller's busy time.
    assert _value(store, "hw.gpu.memory.utilization") == pytest.approx(40000 / 81559)
    assert _value(store, "hw.temperature", hw__sensor_location="gpu") == pytest.approx(61)
    assert _value(store, "hw.temperature", hw__sensor_location="memory") == pytest.approx(70)
    assert _value(store, "gpu.clock.frequency", gpu__clock__domain="sm") == 1980e6  # MHz -> Hz


def test_grpc_receiver_gets_served_values_in_contract_units(
    served: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {slow: {interval: 0.3}}\n", encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, served.env,
                         [*FAST, "--config", str(config)],
                         env={"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=acme"})
    try:
        store = otlp_grpc_receiver.store
        _assert_served_values(store)
        point = store.latest("hw.gpu.utilization", {"hw.id": UUIDS[2]})
        assert point is not None
        assert point.unit == "1" and point.kind == "gauge"
        assert "hw.type" not in point.attributes  # hw.gpu.* list none (hw.power/status do)
        assert point.attributes["hw.vendor"] == "NVIDIA"
        assert point.attributes["hw.model"] == "NVIDIA H100 80GB HBM3"
        assert point.attributes["gpu.index"] == 2
        assert point.attributes["gpu.pci.bus_id"] == "00000000:1A:00.0"
        assert point.resource["service.name"] == "gpu-otel-agent"
        assert point.attributes["hw.driver_version"] == "580.95.05"
        assert point.attributes["hw.serial_number"] and point.attributes["hw.firmware_version"]
        memory_clock = _value(store, "gpu.clock.frequency", gpu__clock__domain="memory")
        assert memory_clock == 2619e6  # slow group, MHz -> Hz
        assert _value(store, "gpu.power.limit") == pytest.approx(700)  # mW -> W
        energy = store.wait_for(
            lambda s: len(pts := s.points("hw.energy", {"hw.id": UUIDS[2]})) >= 3 and pts,
            timeout=15, what="three energy points",
        )
        assert energy[0].kind == "sum" and energy[0].monotonic and energy[0].unit == "J"
        assert energy[-1].value > energy[0].value > 0
        status = {p.attributes["hw.state"]: p.value
                  for p in store.points("hw.status", {"hw.id": UUIDS[2]})[-3:]}
        assert status == {"ok": 1, "degraded": 0, "failed": 0}
        request = store.received()[-1]
        assert request.metadata.get("x-tenant") == "acme"
        # Sent by the agent's own gRPC client: grpcio's C core is not even mapped.
        maps = Path(f"/proc/{agent.process.pid}/maps").read_text(encoding="utf-8")
        assert "/_ssl." in maps  # the agent's libraries are listed, just not grpcio's
        assert "cygrpc" not in maps
    finally:
        agent.close()


def test_http_protobuf_protocol(
    served: SimulatedNode, otlp_http_receiver: OtlpHttpReceiver, tmp_path: Path
) -> None:
    agent = AgentProcess(
        tmp_path, otlp_http_receiver.endpoint, served.env, FAST,
        env={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
             "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
    )
    try:
        _assert_served_values(otlp_http_receiver.store)
        assert otlp_http_receiver.store.received()[-1].compression == "gzip"
    finally:
        agent.close()


def test_rotel_as_independent_receiver(
    served: SimulatedNode, rotel_receiver: RotelReceiver, tmp_path: Path
) -> None:
    agent = AgentProcess(tmp_path, rotel_receiver.endpoint, served.env, FAST)
    try:
        _assert_served_values(rotel_receiver.store)
    finally:
        agent.close()


def test_simulate_flag_runs_the_same_path_with_console_exporter(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[2] / "examples/scenarios/h100-8gpu.yaml"
    agent = AgentProcess(
        tmp_path, "http://127.0.0.1:1", None,
        ["--simulate", str(scenario), "--exporter", "console", "--console-format",
         "otlp-json", *FAST],
    )
    try:
        import time

        deadline = time.monotonic() + 30
        while '"name": "hw.gpu.utilization"' not in agent.log():
            assert agent.process.poll() is None, agent.log()
            assert time.monotonic() < deadline, agent.log()
            time.sleep(0.2)
        agent.shutdown()
        assert agent.process.returncode == 0, agent.log()
    finally:
        agent.close()


def test_gpm_metrics_on_hopper_only(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "uuid": UUIDS[1], "utilization_gpu": 50}
    scenario = write_scenario(tmp_path, {"devices": [h100(0, uuid=UUIDS[0]), a100]})
    config = tmp_path / "agent.yaml"
    config.write_text("groups: {gpm: {interval: 0.3}}\n", encoding="utf-8")
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        node.command({"op": "set", "device": 0, "values": {
            "sm_active": 42, "sm_occupancy": 30, "tensor_active": 20, "dram_active": 55}})
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             [*FAST, "--config", str(config)])
        try:
            store = otlp_grpc_receiver.store
            expected = {"gpu.sm.utilization": 0.42, "gpu.sm.occupancy": 0.30,
                        "gpu.tensor.utilization": 0.20, "gpu.dram.utilization": 0.55}
            for metric, value in expected.items():
                point = store.wait_for(lambda s, m=metric: s.latest(m, {"hw.id": UUIDS[0]}),
                                       timeout=15, what=metric)
                assert point.value == pytest.approx(value)
            store.wait_for(lambda s: len(s.points("hw.power", {"hw.id": UUIDS[1]})) >= 3,
                           timeout=15)
            assert store.points("gpu.sm.utilization", {"hw.id": UUIDS[1]}) == []  # Ampere
        finally:
            agent.close()
