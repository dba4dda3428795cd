"""The running agent's default path loads no protobuf runtime (issue 41: 3.7 MiB resident).

Metrics are written by hand (``otlp_proto``, ``otlp/wire_values``) and sent by the agent's own
gRPC client; generated classes are imported only where something reads or builds a message:
a collector's ``RetryInfo``, the SDK fallback, callers that want a request as a message (a
kubelet's pod-resources answers are read by hand too: test_podresources_protobuf_off.py).
Checked in a fresh interpreter that imports what ``gpu-agent run`` imports, builds the default
exporters, the event sender and the kubelet client (its socket absent), and sends a snapshot
and a health event to a real local receiver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.receivers.otlp_grpc import OtlpGrpcReceiver

PROBE = """
import json, sys
import gpu_otel_agent.cli, gpu_otel_agent.runtime.agent
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import AttributionConfig, KubeletConfig
from gpu_otel_agent.export.events.senders import build_event_sender
from gpu_otel_agent.export.metrics.exporters import build_snapshot_exporter
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.semconv import agent_resource
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity, DeviceSnapshot, GroupSample, HealthState, NodeSnapshot, Reading)
from gpu_otel_agent.plugins.kubernetes.pod_source_entry import pod_source
from gpu_otel_agent.plugins.kubernetes.podresources import PodResourcesUnavailable

def protobuf():
    return sorted(m for m in sys.modules if m.endswith("_pb2") or m.startswith("google._upb"))

endpoint = sys.argv[1]
env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
config = load(None, environ=env)
resource = agent_resource("node-1")
identity = DeviceIdentity("GPU-0", 0, "nvidia", "H100", "0000:01:00.0")
sample = GroupSample("fast", (Reading("hw.power", 300.5),
                              Reading("hw.gpu.utilization", 0.5, (("hw.gpu.task", "general"),))),
                     time_ns=1_000)
snapshot = NodeSnapshot((DeviceSnapshot(identity, HealthState.OK, 10).with_sample(sample),),
                        taken_ns=5_000)
exporter = build_snapshot_exporter(config, resource, env)
exported = exporter.export(snapshot, 10.0)
events = build_event_sender(config, resource, env)
kubelet = pod_source(AttributionConfig(kubelet=KubeletConfig(socket="/nonexistent/kubelet.sock")))
try:
    kubelet.list_blocking()
except PodResourcesUnavailable:
    pass
event = HealthEvent("gpu.xid", 1_700_000_000_000_000_000, Severity.FATAL, "XID 79",
                    (("hw.id", "GPU-0"), ("gpu.xid.code", 79)))
sent = events.send([event]).ok
loaded = protobuf()
exporter.shutdown(1.0)
events.shutdown()
print(json.dumps({"exported": exported, "kind": type(exporter).__name__,
                  "sent": sent, "loaded": loaded, "modules": sorted(sys.modules)}))
"""


@pytest.fixture
def receiver() -> Iterator[OtlpGrpcReceiver]:
    with OtlpGrpcReceiver() as running:
        yield running


def _probe(receiver: OtlpGrpcReceiver) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE, receiver.endpoint], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_default_start_up_and_export_load_no_protobuf(receiver: OtlpGrpcReceiver) -> None:
    out = _probe(receiver)
    assert out["kind"] == "OtlpSnapshotExporter"  # the fast path, not the SDK fallback
    assert out["exported"] is True
    (received,) = receiver.store.received("metrics")  # decoded by the generated classes
    names = {m.name for rm in received.request.resource_metrics  # type: ignore[attr-defined]
             for sm in rm.scope_metrics for m in sm.metrics}
    assert {"hw.power", "hw.gpu.utilization"} <= names
    assert out["sent"] is True
    receiver.store.wait_for(lambda store: store.received("logs"), timeout=30,
                            what="the health event")
    assert out["loaded"] == []


# Kept off the default path too (issue 41, 1.8 MiB resident together): the SDK's resource module
# (psutil, platform, opentelemetry.attributes; model/resource.py makes the resource), its
# InstrumentationScope (export/otlp/scope.py), and typing_extensions, which
# opentelemetry.util.re brings (imported only when OTEL_EXPORTER_OTLP_HEADERS is set); and
# http.client, which only a second agent's look at the first one needs (runtime/agent.py); and
# importlib.metadata with its email.message, zipfile, csv and importlib.resources (0.95 MiB):
# entry points and the version are read by gpu_otel_agent.distributions; email.utils (0.8 MiB),
# whose formatdate the endpoint's Date header took (http_server/http_date.py); uuid and the
# platform it brings (0.23 MiB; model/uuid_text.py writes the two UUIDs the agent sends); the idna
# codec (0.4 MiB) an ASCII collector's name no longer goes through (grpc/connection.resolvable).
OFF_START_UP = ("opentelemetry.sdk.resources", "psutil", "opentelemetry.sdk.util.instrumentation",
                "opentelemetry.attributes", "opentelemetry.util.re", "typing_extensions",
                "http.client", "statistics", "difflib", "importlib.metadata", "email.message",
                "zipfile", "csv", "importlib.resources", "email", "email.utils", "uuid", "platform",
                "encodings.idna", "unicodedata", "stringprep")


def test_default_start_up_and_export_load_no_sdk_resource(receiver: OtlpGrpcReceiver) -> None:
    out = _probe(receiver)
    assert out["exported"] is True and out["sent"] is True
    assert [name for name in OFF_START_UP if name in out["modules"]] == []
    (received,) = receiver.store.received("metrics")
    (resource_metrics,) = received.request.resource_metrics  # type: ignore[attr-defined]
    attributes = {kv.key: kv.value.string_value for kv in resource_metrics.resource.attributes}
    assert attributes["service.name"] == "gpu-otel-agent"
    assert attributes["host.name"] == "node-1"
    assert attributes["telemetry.sdk.language"] == "python"


PLUGINS_PROBE = """
import json, sys
import gpu_otel_agent.cli, gpu_otel_agent.runtime.agent
from gpu_otel_agent.extensions.loading import load_group
groups = sys.argv[1:]
found = {group: [entry.name for entry in load_group(group)] for group in groups}
print(json.dumps({"found": found, "modules": sorted(sys.modules)}))
"""

# The groups ``run`` loads on the default path (backends, node plugins, workload sources, the
# CLI's commands): found as importlib.metadata finds them, without importing it.
RUN_GROUPS = ("gpu_otel_agent.backends", "gpu_otel_agent.node_plugins",
              "gpu_otel_agent.workload_sources", "gpu_otel_agent.commands")


def test_run_finds_its_plugins_without_importlib_metadata() -> None:
    from importlib.metadata import entry_points

    done = subprocess.run([sys.executable, "-c", PLUGINS_PROBE, *RUN_GROUPS],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    expected = {group: sorted({entry.name for entry in entry_points(group=group)})
                for group in RUN_GROUPS}
    assert out["found"] == expected
    assert all(out["found"][group] for group in ("gpu_otel_agent.backends",
                                                 "gpu_otel_agent.commands"))
    assert [name for name in OFF_START_UP if name in out["modules"]] == []
