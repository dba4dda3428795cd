"""Health events as OTLP log records, and on the console."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.events.senders import ConsoleEventSender
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from tests.receivers.decode import log_events

EVENT = HealthEvent("gpu.xid", 1_700_000_000_123_456_789, Severity.FATAL, "XID 79 ...",
                    (("hw.id", "GPU-1"), ("gpu.index", 3), ("gpu.xid.code", 79),
                     ("gpu.call.duration", 0.5)),
                    workloads=((("process.pid", 7), ("k8s.pod.name", "train-0"),
                                ("k8s.namespace.name", "ml")),
                               (("process.pid", 8), ("k8s.pod.name", "infer-1"),
                                ("k8s.namespace.name", "serving"))))


def test_log_record_has_the_name_twice_severity_body_and_typed_attributes() -> None:
    request = LogEncoder(Resource.create({"service.name": "gpu-otel-agent"})).encode([EVENT])
    decoded, second = log_events(request, 0.0)
    assert decoded.event_name == "gpu.xid"
    assert decoded.attributes["event.name"] == "gpu.xid"
    assert (decoded.severity_number, decoded.severity_text) == (21, "FATAL")
    assert decoded.body == "XID 79 ..."
    assert decoded.time_unix_nano == EVENT.time_ns
    assert decoded.attributes["gpu.index"] == 3
    assert decoded.attributes["gpu.call.duration"] == 0.5
    # One record per workload: conventional attributes keep their types (an int PID, a
    # string pod), each pod beside its own namespace; the records share the event's id.
    assert decoded.attributes["process.pid"] == 7 and second.attributes["process.pid"] == 8
    assert (decoded.attributes["k8s.pod.name"], decoded.attributes["k8s.namespace.name"]) == (
        "train-0", "ml")
    assert (second.attributes["k8s.pod.name"], second.attributes["k8s.namespace.name"]) == (
        "infer-1", "serving")
    assert decoded.attributes["gpu.event.id"] == second.attributes["gpu.event.id"] == EVENT.uid
    assert decoded.attributes["log.record.uid"] == EVENT.uid
    assert second.attributes["log.record.uid"] not in (EVENT.uid, "")
    assert second.attributes["log.record.uid"] == EVENT.record_uid(1)  # stable on re-send
    assert second.attributes["gpu.index"] == 3 and second.body == decoded.body
    assert decoded.resource["service.name"] == "gpu-otel-agent"


def test_console_prints_one_json_object_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    assert ConsoleEventSender(json=True).send([EVENT, EVENT]).ok
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4  # two records (workloads) per event
    record = json.loads(lines[0])
    assert record["event_name"] == record["attributes"]["event.name"] == "gpu.xid"
    assert record["attributes"]["process.pid"] == 7
    assert record["severity_text"] == "FATAL"


def test_event_survives_its_spool_encoding() -> None:
    assert HealthEvent.from_json(EVENT.to_json()) == EVENT


def test_console_lines_print_one_line_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    assert ConsoleEventSender().send([EVENT, EVENT]).ok
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2  # one per event, whatever the number of workloads it hit
    assert all("gpu.xid" in line and "ml/train-0, serving/infer-1" in line for line in lines)
