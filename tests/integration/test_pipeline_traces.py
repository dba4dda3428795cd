"""Optional traces of the agent's own pipeline: a span per OTLP export and per scrape."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.metrics.tracing import NoTracing, build_tracer
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.receivers.netutil import free_port, wait_for_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration


def _spans(store: Store) -> list[tuple[dict[str, Any], Any]]:
    """(resource attributes, span) of every span received."""
    found = []
    for received in store.received("traces"):
        for resource_spans in received.request.resource_spans:
            resource = {kv.key: kv.value.string_value
                        for kv in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                found.extend((resource, span) for span in scope.spans)
    return found


def _attributes(span: Any) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out


def test_exports_and_scrapes_are_traced_when_enabled(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "agent.yaml"
    config.write_text(yaml.safe_dump({
        "tracing": {"enabled": True},
        "prometheus": {"enabled": True, "listen": f"127.0.0.1:{port}"},
    }), encoding="utf-8")
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, four_gpu_node.env,
                         ["--interval", "0.2", "--export-interval", "0.3", "--config",
                          str(config)],
                         env={"OTEL_BSP_SCHEDULE_DELAY": "200"})
    try:
        assert wait_for_port("127.0.0.1", port, 20, alive=lambda: agent.process.poll() is None)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            size = len(response.read())
        store = otlp_grpc_receiver.store
        store.wait_for(lambda s: {"gpu_agent.export", "gpu_agent.scrape"} <= {
            span.name for _, span in _spans(s)}, timeout=15, what="export and scrape spans")
        spans = _spans(store)
        exports = [(r, s) for r, s in spans if s.name == "gpu_agent.export"]
        resource, export = exports[0]
        assert resource["service.name"] == "gpu-otel-agent"
        assert _attributes(export) == {"gpu_agent.devices": 4, "gpu_agent.export.ok": True}
        assert export.end_time_unix_nano > export.start_time_unix_nano
        (scrape,) = [s for _, s in spans if s.name == "gpu_agent.scrape"]
        assert _attributes(scrape) == {"gpu_agent.scheme": "otel",
                                       "gpu_agent.scrape.bytes": size}
    finally:
        agent.terminate()
        agent.close()


def test_no_tracing_unless_enabled() -> None:
    from opentelemetry.sdk.resources import Resource

    assert isinstance(build_tracer(load(None, environ={}), Resource.create({})), NoTracing)
