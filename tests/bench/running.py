"""The real agent on a simulated node, exporting to a local OTLP receiver: the set-up the
long-running cases share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store


@dataclass(frozen=True)
class Running:
    node: SimulatedNode
    store: Store
    agent: AgentProcess
    gpus: int


@contextmanager
def agent_on_node(scenario: Path, workdir: Path, flags: Sequence[str]) -> Iterator[Running]:
    """Yields once every GPU's self-telemetry has arrived; the agent is killed on the way out
    (a case that wants a clean exit terminates it first)."""
    gpus = len(load_scenario(scenario).devices)
    with OtlpGrpcReceiver() as receiver, \
            SimulatedNode.start(scenario, state_dir=workdir / "node") as node:
        agent = AgentProcess(workdir, receiver.endpoint, node.env, flags)
        try:
            receiver.store.wait_for(
                lambda s: len(s.latest_values("gpu_agent.cycles.completed", "hw.id")) == gpus,
                timeout=60, what="every GPU's self-telemetry")
            yield Running(node, receiver.store, agent, gpus)
        finally:
            agent.close()
