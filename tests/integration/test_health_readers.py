"""One GPU health, decided once, at every receiver: the OTLP receiver's ``hw.status``, a
Prometheus scrape's ``hw_status`` and the local endpoint's ``/v1/snapshot`` and ``/v1/health``
say the same state of each GPU while its health moves (an XID the health engine holds, the GPU
lost, back), with health events on and off."""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_otel_agent.local.client import LocalClientError, get
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
GPU = 1
OTHER = 2


def _otlp(store: Store, uuid: str) -> str | None:
    """The state whose latest hw.status point is 1 (None until every state has a point)."""
    values = {state: store.latest("hw.status", {"hw.id": uuid, "hw.state": state})
              for state in ("ok", "degraded", "failed")}
    if any(point is None for point in values.values()):
        return None
    on = [state for state, point in values.items() if point is not None and point.value == 1]
    return on[0] if len(on) == 1 else None


def _prometheus(port: int, uuid: str) -> str | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    on = [sample.labels["hw_state"] for family in text_string_to_metric_families(text)
          for sample in family.samples
          if sample.name == "hw_status" and sample.labels.get("hw_id") == uuid
          and sample.value == 1]
    return on[0] if len(on) == 1 else None


def _local(agent: AgentProcess, uuid: str) -> tuple[str | None, str | None]:
    """The state /v1/snapshot and /v1/health say."""
    with contextlib.suppress(LocalClientError):
        snapshot = get(agent.socket_path, "/v1/snapshot")
        health = get(agent.socket_path, "/v1/health")
        return (next((d["health"] for d in snapshot["devices"] if d["uuid"] == uuid), None),
                next((d["state"] for d in health["devices"] if d["uuid"] == uuid), None))
    return None, None


def _readers(store: Store, port: int, agent: AgentProcess, uuid: str) -> dict[str, str | None]:
    snapshot, health = _local(agent, uuid)
    return {"otlp": _otlp(store, uuid), "prometheus": _prometheus(port, uuid),
            "/v1/snapshot": snapshot, "/v1/health": health}


def _all_say(store: Store, port: int, agent: AgentProcess, uuid: str, state: str) -> Callable[
        [Store], dict[str, str | None] | None]:
    def check(_: Store) -> dict[str, str | None] | None:
        said = _readers(store, port, agent, uuid)
        return said if set(said.values()) == {state} else None
    return check


@contextlib.contextmanager
def _running(tmp_path: Path, receiver: OtlpGrpcReceiver, node: SimulatedNode,
             health: bool) -> Iterator[tuple[AgentProcess, int]]:
    """The agent pushing to ``receiver``, serving Prometheus on a port and its local socket,
    once it answers for every GPU; stopped cleanly at the end."""
    port = free_port()
    config = tmp_path / "agent.yaml"
    config.write_text(
        "call_timeout: 0.5\nlost_reprobe_interval: 0.5\n"
        f"prometheus: {{enabled: true, listen: '127.0.0.1:{port}'}}\n"
        f"health: {{enabled: {str(health).lower()}}}\n", encoding="utf-8")
    agent = AgentProcess(tmp_path, receiver.endpoint, node.env,
                         ["--config", str(config), *FAST]).serving(port)
    try:
        agent.answering()
        yield agent, port
    finally:
        agent.shutdown()
        agent.close()


def _wait(store: Store, port: int, agent: AgentProcess, uuid: str, state: str) -> None:
    store.wait_for(_all_say(store, port, agent, uuid, state), timeout=30,
                   what=f"every reader says {uuid} is {state} "
                        f"(last: {_readers(store, port, agent, uuid)})")


def _health(agent: AgentProcess) -> dict[str, Any]:
    return get(agent.socket_path, "/v1/health")


def test_a_degraded_gpu_lost_and_back_reads_the_same_everywhere(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, store = four_gpu_node, otlp_grpc_receiver.store
    with _running(tmp_path, otlp_grpc_receiver, node, health=True) as (agent, port):
        _wait(store, port, agent, UUIDS[GPU], "ok")
        # XID 48: the engine holds the GPU degraded (its memory), the sampler still reads it.
        node.command({"op": "xid", "device": GPU, "code": 48})
        _wait(store, port, agent, UUIDS[GPU], "degraded")
        # Lost as well: the sampler's view is the worse one; both reasons are held.
        node.command({"op": "lost", "device": GPU})
        _wait(store, port, agent, UUIDS[GPU], "failed")
        (gpu,) = [d for d in _health(agent)["devices"] if d["uuid"] == UUIDS[GPU]]
        assert gpu["subsystems"]["memory"]["state"] == "degraded"
        assert any("XID 48" in r for r in gpu["subsystems"]["memory"]["reasons"])
        assert gpu["subsystems"]["driver"]["state"] == "failed"
        assert any(r.startswith("lost") for r in gpu["subsystems"]["driver"]["reasons"])
        _wait(store, port, agent, UUIDS[OTHER], "ok")  # one GPU's health is its own
        # Back: a GPU back from loss was reset, so the XID's condition went with it.
        node.command({"op": "recover", "device": GPU})
        _wait(store, port, agent, UUIDS[GPU], "ok")
        assert _health(agent)["health_engine"] is True


def test_with_health_events_off_a_lost_gpu_reads_failed_everywhere(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, store = four_gpu_node, otlp_grpc_receiver.store
    with _running(tmp_path, otlp_grpc_receiver, node, health=False) as (agent, port):
        node.command({"op": "xid", "device": GPU, "code": 48})  # no engine: not judged
        node.command({"op": "lost", "device": GPU})
        _wait(store, port, agent, UUIDS[GPU], "failed")
        document = _health(agent)
        assert document["health_engine"] is False
        (gpu,) = [d for d in document["devices"] if d["uuid"] == UUIDS[GPU]]
        assert gpu["subsystems"]["driver"]["state"] == "failed"
        assert gpu["subsystems"]["memory"] == {"state": "ok", "reasons": []}
        assert not store.points("gpu.health.status")  # the engine's series: none without it
        node.command({"op": "recover", "device": GPU})
        _wait(store, port, agent, UUIDS[GPU], "ok")
