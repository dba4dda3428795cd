"""Encode time per export cycle, on a snapshot read through the real NVIDIA backend.

Runs in a child process (``python -m tests.bench.encoding``) because attaching pynvml to a
simulated node is once per process. The child reads every group of every GPU in-process with
``NvidiaBackend`` -- the agent's own probe and read code -- builds the ``NodeSnapshot`` the
exporters would see, and times one export's CPU work that does not depend on the network: the
agent's ``ProtoEncoder`` (snapshot -> OTLP protobuf) plus serialisation, and for comparison the
SDK path (``gpu_otel_agent.export.metrics.sdk_metrics.encode`` -> ``encode_metrics`` ->
serialisation). The snapshot is real (same library, same node, same code path), not rebuilt
from what a receiver decoded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.model.snapshot import NodeSnapshot
from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.results import EncodeResult

METHOD = (
    "in-process NvidiaBackend read of every group on every GPU of the simulated node, "
    "then ProtoEncoder.encode_bytes (the agent's path; the SDK path "
    "encode + encode_metrics + SerializeToString for comparison), median of {repeats} repeats"
)


@dataclass(frozen=True)
class NodeRead:
    """One read of every group of every GPU, as the agent's first cycles would see it."""

    snapshot: NodeSnapshot
    resource: Resource
    read_ms: float
    close: Callable[[], None]


def read_node(node_env: Mapping[str, str]) -> NodeRead:
    """Attach this process to the node and read it through ``NvidiaBackend`` (once per
    process: pynvml attaches once)."""
    from gpu_otel_agent.simulation.node import attach_in_process

    attach_in_process(node_env)  # before pynvml's nvmlInit, which NvidiaBackend.open calls

    from gpu_otel_agent.backends.discovery import OpenBackend
    from gpu_otel_agent.config.load import load
    from gpu_otel_agent.model.snapshot import DeviceSnapshot, GroupSample, HealthState
    from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
    from gpu_otel_agent.runtime.agent import build_resource

    backend = NvidiaBackend()
    info = backend.open()
    devices = backend.devices()
    groups = [sorted(device.probe()) for device in devices]
    for device, names in zip(devices, groups, strict=True):
        if "gpm" in names:
            device.read("gpm")  # GPM needs a previous sample; the agent's first cycle does this
    read_started = time.perf_counter()
    snapshots = []
    for device, names in zip(devices, groups, strict=True):
        samples = {g: GroupSample(g, device.read(g), time.time_ns()) for g in names}
        snapshots.append(DeviceSnapshot(device.identity, HealthState.OK, time.time_ns(),
                                        MappingProxyType(samples)))
    read_ms = (time.perf_counter() - read_started) * 1000
    resource = build_resource(load(None), [OpenBackend(backend, info, tuple(devices))])
    return NodeRead(NodeSnapshot(tuple(snapshots), time.time_ns()), resource, read_ms,
                    backend.close)


def _measure(node_env: Mapping[str, str], repeats: int) -> dict[str, float | int]:
    read = read_node(node_env)

    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

    from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
    from gpu_otel_agent.export.metrics.sdk_metrics import encode

    snapshot, resource, read_ms = read.snapshot, read.resource, read.read_ms
    encoder = ProtoEncoder(resource)
    agent_times: list[float] = []
    sdk_times: list[float] = []
    payload = b""
    for _ in range(repeats):
        t0 = time.perf_counter()
        payload = encoder.encode_bytes(snapshot)
        t1 = time.perf_counter()
        data = encode(snapshot, resource)
        sdk_payload = encode_metrics(data).SerializeToString()
        t2 = time.perf_counter()
        agent_times.append((t1 - t0) * 1000)
        sdk_times.append((t2 - t1) * 1000)
    assert payload == sdk_payload, "the agent's encoder must send what the SDK would"
    read.close()
    points = sum(
        len(metric.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    )
    return {
        "agent_encode_ms": statistics.median(agent_times),
        "sdk_encode_ms": statistics.median(sdk_times),
        "payload_bytes": len(payload),
        "points": points,
        "read_ms": read_ms,
    }


@dataclass(frozen=True)
class EncodeCase:
    name: str
    scenario: Path
    repeats: int


def run_encode_case(case: EncodeCase, workdir: Path) -> EncodeResult:
    gpus = len(load_scenario(case.scenario).devices)
    with SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node:
        child = subprocess.run(
            [sys.executable, "-m", "tests.bench.encoding", json.dumps(dict(node.env)),
             "--repeats", str(case.repeats)],
            capture_output=True, text=True, timeout=300, check=False,
        )
    if child.returncode:
        raise RuntimeError(f"encoding child failed:\n{child.stderr[-3000:]}")
    figures = json.loads(child.stdout)
    agent_ms, sdk_ms = float(figures["agent_encode_ms"]), float(figures["sdk_encode_ms"])
    return EncodeResult(
        case=case.name,
        scenario=case.scenario.name,
        gpus=gpus,
        method=METHOD.format(repeats=case.repeats),
        repeats=case.repeats,
        points=int(figures["points"]),
        sdk_encode_ms=round(sdk_ms, 3),
        total_ms=round(agent_ms, 3),
        payload_bytes=int(figures["payload_bytes"]),
        read_ms=round(float(figures["read_ms"]), 3),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("node_env", help="the node's attach environment, as JSON")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    json.dump(_measure(json.loads(args.node_env), args.repeats), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
