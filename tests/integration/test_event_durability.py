"""Write-ahead events end to end: ``kill -9`` of the agent after it observed faults loses none
of them, and every re-send carries the event's one ``log.record.uid`` (the real agent
process killed with SIGKILL, a real OTLP receiver, faults from the simulated node)."""

from __future__ import annotations

import re
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.exports import assert_event_identity
from tests.integration.harness import AgentProcess
from tests.receivers import decode
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import LogEvent
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
# XIDs that leave the GPU healthy: each fault is one gpu.xid event, nothing else.
# The first is sent and never acknowledged (while it is refused, the spool offers only its
# oldest segment: order holds); the rest are only observed, with the collector gone.
REFUSED = [(0, 13)]
UNSENT = [(1, 31), (2, 43), (3, 45), (0, 68), (1, 69), (2, 70), (3, 71)]


def _produced(port: int) -> float:
    """The agent's own count of health events handed to its exporter (Prometheus)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    match = re.search(r"^gpu_agent_events_produced_total(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _refused_xids(store: Store) -> list[LogEvent]:
    """Events the receiver saw in requests it answered with an error (not acknowledged)."""
    return [event for received in store.received("logs", accepted=False)
            for event in decode.log_events(received.request, received.received_at)
            if event.event_name == "gpu.xid"]


def _key(event: LogEvent) -> tuple[object, object]:
    return event.attributes["hw.id"], event.attributes["gpu.xid.code"]


def test_kill_9_after_faults_were_observed_loses_none_and_resends_share_one_uid(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node, receiver, store = four_gpu_node, otlp_grpc_receiver, otlp_grpc_receiver.store
    port = free_port()
    config = tmp_path / "agent.yaml"
    config.write_text(f"prometheus: {{enabled: true, listen: '127.0.0.1:{port}'}}\n",
                      encoding="utf-8")
    args = [*FAST, "--config", str(config)]
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    agent = AgentProcess(tmp_path, receiver.endpoint, node.env, args, env=env).serving(port)
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=20)
        # The collector answers but refuses: these are sent and never acknowledged.
        receiver.reject()
        for device, code in REFUSED:
            node.command({"op": "xid", "device": device, "code": code})
        store.wait_for(lambda s: {_key(e) for e in _refused_xids(s)} >= {
            (UUIDS[d], c) for d, c in REFUSED}, timeout=20, what="the refused XIDs")
        # Then it is gone: these are only observed.
        receiver.stop()
        for device, code in UNSENT:
            node.command({"op": "xid", "device": device, "code": code})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _produced(port) < len(REFUSED) + len(UNSENT):
            time.sleep(0.05)
        assert _produced(port) >= len(REFUSED) + len(UNSENT), agent.log()[-3000:]
        agent.process.send_signal(signal.SIGKILL)  # at once: no shutdown, no flush
        agent.process.wait()
        assert agent.process.returncode == -signal.SIGKILL
        assert "run summary" not in agent.log()
        agent.close()

        agent = AgentProcess(tmp_path, receiver.endpoint, node.env, FAST, env=env)
        receiver.accept()
        receiver.start()
        expected = {(UUIDS[d], c) for d, c in [*REFUSED, *UNSENT]}
        store.wait_for(lambda s: {_key(e) for e in s.logs("gpu.xid")} >= expected,
                       timeout=30, what="every XID observed before the kill")
    finally:
        agent.shutdown()
        agent.close()
    refused, accepted = _refused_xids(store), store.logs("gpu.xid")
    assert {_key(e) for e in accepted} == expected
    # One id per fault, the same on every copy: refused before the kill, accepted after it
    # (and any duplicate the receiver got).
    assert_event_identity([*refused, *accepted])
    ids: dict[tuple[object, object], set[object]] = {}
    for event in [*refused, *accepted]:
        ids.setdefault(_key(event), set()).add(event.attributes["log.record.uid"])
    assert all(len(uids) == 1 for uids in ids.values()), ids
    resent = {_key(e) for e in refused} & {_key(e) for e in accepted}
    assert resent == {(UUIDS[d], c) for d, c in REFUSED}  # duplicates, harmless by their id


def test_storm_folded_repeats_survive_kill_9_as_one_summary_with_their_count(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """Ten XID 13s inside one storm window: the first is sent at once, the nine repeats are
    only counted. A kill -9 before the window ends used to lose the count (no summary was
    ever sent); it is on disk beside the spool, and summarised after the restart."""
    node, receiver, store = four_gpu_node, otlp_grpc_receiver, otlp_grpc_receiver.store
    port = free_port()
    config = tmp_path / "agent.yaml"
    # A window far longer than the test: no summary can be due before the kill.
    config.write_text(f"prometheus: {{enabled: true, listen: '127.0.0.1:{port}'}}\n"
                      "health: {storm_window: 600}\n", encoding="utf-8")
    args = [*FAST, "--config", str(config)]
    agent = AgentProcess(tmp_path, receiver.endpoint, node.env, args).serving(port)
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=20)
        for _ in range(10):
            node.command({"op": "xid", "device": 0, "code": 13})
        store.wait_for(lambda s: any(_key(e) == (UUIDS[0], 13) for e in s.logs("gpu.xid")),
                       timeout=20, what="the first XID 13")
        deadline = time.monotonic() + 20  # all ten observed (one sent, nine counted)
        while time.monotonic() < deadline and _produced(port) < 1:
            time.sleep(0.05)
        journal = tmp_path / "event-spool" / "storm.jsonl"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and b'"c":9' not in (
                journal.read_bytes() if journal.exists() else b""):
            time.sleep(0.05)
        assert b'"c":9' in journal.read_bytes(), agent.log()[-3000:]
        assert not [e for e in store.logs("gpu.xid")
                    if e.attributes.get("gpu.event.source") == "summary"]
        agent.process.send_signal(signal.SIGKILL)
        agent.process.wait()
        agent.close()

        agent = AgentProcess(tmp_path, receiver.endpoint, node.env, args)
        store.wait_for(lambda s: [e for e in s.logs("gpu.xid")
                                  if e.attributes.get("gpu.event.source") == "summary"],
                       timeout=30, what="the storm summary after the restart")
    finally:
        agent.shutdown()
        agent.close()
    summaries = [e for e in store.logs("gpu.xid")
                 if e.attributes.get("gpu.event.source") == "summary"]
    assert {e.attributes["log.record.uid"] for e in summaries} == {
        summaries[0].attributes["log.record.uid"]}  # one summary (copies share its id)
    assert summaries[0].attributes["gpu.event.count"] == 9
    assert summaries[0].attributes["hw.id"] == UUIDS[0]
    assert summaries[0].attributes["gpu.xid.code"] == 13


QUIET_S = 8.0  # the delay the collector asks for (a real one asks 30 s or more: same path)


def test_a_collector_asking_for_seconds_of_quiet_gets_them_from_metrics_and_events(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """RESOURCE_EXHAUSTED with a RetryInfo of QUIET_S in the Status details: the agent,
    exporting every 0.25 s with XIDs to send, sends nothing more to that collector until the
    delay has passed (it sent 20-40 metric and 9-15 log requests in 40 s before: the delay held
    only inside one request's retries); the XIDs arrive after the delay."""
    import grpc
    from google.protobuf.message import Message

    from tests.receivers.otlp_grpc import Answer, throttled
    from tests.receivers.records import Signal

    node, receiver, store = four_gpu_node, otlp_grpc_receiver, otlp_grpc_receiver.store
    throttling = [False]
    # Every request as the receiver decided on it, in that order: (arrival, signal, refused).
    decided: list[tuple[float, Signal, bool]] = []
    deciding = threading.Lock()  # metrics and logs arrive on threads of their own

    def rule(signal_: Signal, request: Message) -> Answer | None:
        with deciding:
            refuse, throttling[0] = throttling[0], False  # the one answer that asks for quiet
            decided.append((time.monotonic(), signal_, refuse))
        return throttled(QUIET_S, grpc.StatusCode.RESOURCE_EXHAUSTED) if refuse else None

    receiver.answer_with(rule)
    agent = AgentProcess(tmp_path, receiver.endpoint, node.env, FAST)
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=30)
        # Refuse the next request, whichever it is; the XIDs come after the switch, so no
        # request that carries them can be accepted before the refusal: they are either in
        # the refused request or held by the agent while the delay runs.
        throttling[0] = True
        for device, code in UNSENT[:4]:
            node.command({"op": "xid", "device": device, "code": code})
        store.wait_for(lambda s: bool(s.received(accepted=False)), timeout=20,
                       what="the throttling answer")
        store.wait_for(lambda s: {_key(e) for e in s.logs("gpu.xid")} >= {
            (UUIDS[d], c) for d, c in UNSENT[:4]}, timeout=90, what="the XIDs after the delay")
        # Nothing of either signal before the delay, counted from the refusal (the agent's
        # wait began after it); order in arrival time, so a loaded machine only adds to it.
        (refusal,) = [i for i, (_, _, refused) in enumerate(decided) if refused]
        store.wait_for(lambda s: {signal_ for _, signal_, _ in decided[refusal + 1:]} >= {
            "metrics", "logs"}, timeout=60, what="both signals after the refusal")
        refused_at, after = decided[refusal][0], decided[refusal + 1:]
        assert min(at for at, _, _ in after) - refused_at >= QUIET_S - 0.5
        # And the agent says so in its self-telemetry.
        store.wait_for(lambda s: s.points("gpu_agent.exports.throttled",
                                          {"error.type": "RESOURCE_EXHAUSTED"}),
                       timeout=30, what="gpu_agent.exports.throttled")
    finally:
        agent.shutdown()
        agent.close()


def test_a_record_the_collector_refuses_for_good_is_quarantined_and_never_blocks_the_rest(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    """INVALID_ARGUMENT for every request holding one XID: it used to be offered again
    forever, and none of the next XIDs arrived, across restarts. It is quarantined beside the
    spool, counted per code, and the ten XIDs after it arrive; a restart does not offer it."""
    import grpc
    from google.protobuf.message import Message

    from tests.receivers.otlp_grpc import Answer
    from tests.receivers.records import Signal

    node, receiver, store = four_gpu_node, otlp_grpc_receiver, otlp_grpc_receiver.store
    poison = (3, 94)

    def rule(signal_: Signal, request: Message) -> Answer | None:
        if signal_ != "logs":
            return None
        codes = {e.attributes.get("gpu.xid.code")
                 for e in decode.log_events(request, 0.0)}  # type: ignore[arg-type]
        if poison[1] in codes:
            return Answer(grpc.StatusCode.INVALID_ARGUMENT, "record refused")
        return None

    receiver.answer_with(rule)
    after = [(d, c) for d in range(3) for c in (13, 31, 43)] + [(0, 45)]  # ten XIDs
    agent = AgentProcess(tmp_path, receiver.endpoint, node.env, FAST)
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=30)
        node.command({"op": "xid", "device": poison[0], "code": poison[1]})
        store.wait_for(lambda s: bool(s.received("logs", accepted=False)), timeout=30,
                       what="the refusal")
        for device, code in after:
            node.command({"op": "xid", "device": device, "code": code})
        store.wait_for(lambda s: {_key(e) for e in s.logs("gpu.xid")} >= {
            (UUIDS[d], c) for d, c in after}, timeout=60, what="the ten XIDs after it")
        store.wait_for(lambda s: s.points("gpu_agent.events.quarantined",
                                          {"error.type": "INVALID_ARGUMENT"}),
                       timeout=30, what="gpu_agent.events.quarantined")
    finally:
        agent.shutdown()
        agent.close()
    assert "refused by the collector for good (INVALID_ARGUMENT" in agent.log()
    dead = (tmp_path / "event-spool" / "dead-letter.jsonl").read_bytes().splitlines()
    assert len(dead) == 1 and b'"code":"INVALID_ARGUMENT"' in dead[0]
    refused = len(store.received("logs", accepted=False))
    again = AgentProcess(tmp_path, receiver.endpoint, node.env, FAST)
    try:
        store.wait_for(lambda s: len(s.received("metrics")) > 10, timeout=30)
        time.sleep(2)
    finally:
        again.shutdown()
        again.close()
    assert len(store.received("logs", accepted=False)) == refused  # not offered again
