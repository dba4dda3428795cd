"""Health events end to end: faults injected into the simulated node arrive at a real OTLP
receiver as log records with the contract's names and attributes."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.exports import assert_event_identity
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import LogEvent, Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
MODEL = "NVIDIA H100 80GB HBM3"


def config_args(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    return ["--config", str(path)]


def one(store: Store, name: str, timeout: float = 30.0, **attrs: object) -> LogEvent:
    events = store.wait_for(lambda s: s.logs(name, attrs), timeout=timeout,
                            what=f"{name} {attrs}")
    return events[0]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process to put on a simulated GPU (its executable name is ``sleep``)."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_each_fault_arrives_as_its_event(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    args = config_args(tmp_path, "call_timeout: 0.5\nlost_reprobe_interval: 0.5\n") + FAST
    node = four_gpu_node
    node.command({"op": "proc_add", "device": 2, "pid": sleeper.pid, "used_memory_mib": 100})
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args)
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: len({p.attributes["hw.id"]
                                      for p in s.points("hw.gpu.utilization")}) == 4,
                       timeout=20)
        # XID 79 through NVML: catalog name, action, severity, device and process attributes.
        node.command({"op": "xid", "device": 2, "code": 79})
        xid = one(store, "gpu.xid", **{"hw.id": UUIDS[2]})
        attrs = xid.attributes
        assert attrs["event.name"] == "gpu.xid"
        assert (attrs["gpu.xid.code"], attrs["gpu.xid.name"], attrs["gpu.xid.action"],
                attrs["gpu.event.source"]) == (
            79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", "nvml")
        assert (xid.severity_number, xid.severity_text) == (21, "FATAL")
        assert (attrs["hw.model"], attrs["gpu.index"], attrs["gpu.pci.bus_id"],
                attrs["hw.type"]) == (MODEL, 2, "00000000:1A:00.0", "gpu")
        assert "XID 79" in xid.body and "fallen off the bus" in xid.body
        # Conventional types: one record per process, its PID an int (not an array).
        assert attrs["process.pid"] == sleeper.pid
        assert attrs["process.executable.name"] == "sleep"
        assert attrs["gpu.event.id"] == attrs["log.record.uid"]  # the event's first record
        health = one(store, "gpu.health", **{"hw.id": UUIDS[2], "hw.state": "failed"})
        assert health.attributes["gpu.health.previous_state"] == "ok"
        store.wait_for(lambda s: (p := s.latest("hw.status", {"hw.id": UUIDS[2],
                                                              "hw.state": "failed"}))
                       and p.value == 1, timeout=5, what="hw.status failed after XID 79")
        counter = store.wait_for(lambda s: s.latest("gpu.xid.errors", {"hw.id": UUIDS[2]}),
                                 timeout=5)
        assert (counter.value, counter.attributes["gpu.xid.code"]) == (1, 79)

        node.command({"op": "ecc", "device": 0, "type": "double_bit"})
        ecc = one(store, "gpu.ecc", **{"hw.id": UUIDS[0]})
        assert ecc.attributes["error.type"] == "uncorrected"
        assert ecc.attributes["event.name"] == "gpu.ecc"

        node.command({"op": "lost", "device": 1})
        lost = one(store, "gpu.lost", **{"hw.id": UUIDS[1]})
        assert lost.severity_text == "FATAL"
        node.command({"op": "recover", "device": 1})
        one(store, "gpu.recovered", **{"hw.id": UUIDS[1]})
        one(store, "gpu.health", **{"hw.id": UUIDS[1], "hw.state": "ok"})

        node.command({"op": "hang", "device": 3, "ms": 2500})
        hung = one(store, "gpu.unresponsive", **{"hw.id": UUIDS[3]})
        assert str(hung.attributes["gpu.call"]).startswith("nvml")
        assert hung.attributes["gpu.call.duration"] == 0.5
        one(store, "gpu.recovered", timeout=10, **{"hw.id": UUIDS[3]})
    finally:
        agent.shutdown()
        agent.close()
    # Every event is a log record with the name in both places, and its own identity.
    for event in store.logs():
        assert event.event_name and event.attributes["event.name"] == event.event_name
    kinds = {what[0] for what in assert_event_identity(store.logs()).values()}
    assert kinds >= {"gpu.xid", "gpu.health", "gpu.ecc", "gpu.lost", "gpu.recovered",
                     "gpu.unresponsive"}


def test_events_name_the_processes_with_the_processes_group_switched_off(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    """Attribution is on but its group is off: events fall back to the backend's process list
    instead of an attribution map that nothing fills."""
    args = config_args(tmp_path, "groups: {processes: {enabled: false}}\n") + FAST
    node = four_gpu_node
    node.command({"op": "proc_add", "device": 2, "pid": sleeper.pid, "used_memory_mib": 100})
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args)
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: s.latest("hw.gpu.utilization", {"hw.id": UUIDS[2]}),
                       timeout=20)
        node.command({"op": "xid", "device": 2, "code": 31})
        xid = one(store, "gpu.xid", **{"hw.id": UUIDS[2]})
        assert xid.attributes["process.pid"] == sleeper.pid
        assert xid.attributes["process.executable.name"] == "sleep"
        assert not store.points("gpu.process.memory.usage")
    finally:
        agent.shutdown()
        agent.close()


XIDS = ((0, 13), (1, 31), (2, 43), (3, 45), (0, 64))  # five different faults, no storm


def _xids(store: Store) -> list[tuple[object, object]]:
    return sorted((e.attributes["hw.id"], e.attributes["gpu.xid.code"])
                  for e in store.logs("gpu.xid"))


@pytest.mark.parametrize("restart", [False, True], ids=["same-agent", "agent-restarted"])
def test_events_fired_while_the_collector_is_down_all_arrive_after(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
    restart: bool,
) -> None:
    node = four_gpu_node
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST, env=env)
    store = otlp_grpc_receiver.store
    spool = tmp_path / "event-spool"
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=20)
        otlp_grpc_receiver.stop()
        for device, code in XIDS:
            node.command({"op": "xid", "device": device, "code": code})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _spooled_lines(spool) < len(XIDS):
            time.sleep(0.1)
        assert _spooled_lines(spool) >= len(XIDS), agent.log()
        if restart:
            agent.shutdown()
            agent.close()
            # Damage beside the good segments must not stop the next start or cost them.
            (spool / "seg-999999999999.jsonl").write_bytes(b"\x00not json\n" * 3)
            agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST,
                                 env=env)
            time.sleep(2)  # the new agent starts while the collector is still away
        otlp_grpc_receiver.start()
        expected = sorted((UUIDS[d], c) for d, c in XIDS)
        # Generous: the sender's retry back-off grew while the collector was away.
        store.wait_for(lambda s: _xids(s) == expected, timeout=90,
                       what="the five XIDs fired during the outage")
        time.sleep(1.0)
        assert _xids(store) == expected  # each once
    finally:
        agent.shutdown()
        agent.close()
    assert _spooled_lines(spool) == 0  # the spool drained
    if restart:
        # The five XIDs and the health change XID 64 caused came back from the disk (and the
        # three damaged lines were skipped).
        assert "holds 9 event(s) from before" in agent.log()
        summary = agent.log().rsplit("run summary ", 1)[1]
        assert '"spool_corrupt": 3' in summary and '"resent": 6' in summary


def _spooled_lines(spool: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in spool.glob("seg-*.jsonl"))


def _kmsg_writable() -> bool:
    try:
        with open("/dev/kmsg", "w"):
            return True
    except OSError:
        return False


def test_kernel_log_xid_arrives_and_one_fault_seen_twice_is_reported_once(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    if not _kmsg_writable():
        pytest.skip("writing /dev/kmsg needs root")
    from tests.integration.harness import h100, write_scenario

    # A PCI domain no real GPU and no other test uses, so only this agent maps the line.
    domain = 0x5A00 + (time.monotonic_ns() // 1000) % 0xFF
    bus_id = f"0000{domain:04X}:3B:00.0"
    scenario = write_scenario(tmp_path, {"devices": [
        h100(0, uuid=UUIDS[0]), h100(1, uuid=UUIDS[1], pci_bus_id=bus_id)]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
        store = otlp_grpc_receiver.store
        try:
            store.wait_for(lambda s: s.points("hw.power", {"hw.id": UUIDS[1]}), timeout=20)
            time.sleep(0.5)  # the reader starts at the end of the log
            _kmsg(f"NVRM: Xid (PCI:{domain:04x}:3b:00): 119, pid=4242, name=python3, "
                  "Timeout after 6s of waiting for RPC response from GPU1 GSP!")
            xid = one(store, "gpu.xid", **{"hw.id": UUIDS[1], "gpu.xid.code": 119})
            assert xid.attributes["gpu.event.source"] == "kmsg"
            assert xid.attributes["gpu.xid.name"] == "GSP_RPC_TIMEOUT"
            assert "Timeout after 6s" in xid.body
            # The same fault through NVML and the kernel log: one event.
            node.command({"op": "xid", "device": 1, "code": 43})
            _kmsg(f"NVRM: Xid (PCI:{domain:04x}:3b:00): 43, pid=4242, name=python3, "
                  "Ch 00000010")
            one(store, "gpu.xid", **{"hw.id": UUIDS[1], "gpu.xid.code": 43})
            time.sleep(2.5)  # past the de-duplication window and several exports
            assert len(store.logs("gpu.xid", {"gpu.xid.code": 43})) == 1
            counter = store.latest("gpu.xid.errors", {"hw.id": UUIDS[1], "gpu.xid.code": 43})
            assert counter is not None and counter.value == 1
            assert store.logs("gpu.xid", {"hw.id": UUIDS[0]}) == []
        finally:
            agent.shutdown()
            agent.close()


def _kmsg(line: str) -> None:
    with open("/dev/kmsg", "w") as kmsg:
        kmsg.write(line + "\n")


def xid_burst(socket_path: Path, device: int, code: int, count: int) -> float:
    """``count`` XIDs through one control connection, pipelined; returns the seconds taken."""
    import json
    import socket
    import threading

    line = json.dumps({"op": "xid", "device": device, "code": code}).encode() + b"\n"
    start = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(socket_path))
        # Send on a thread: the node answers each line, and both directions must flow.
        sender = threading.Thread(target=conn.sendall, args=(line * count,), daemon=True)
        sender.start()
        answers = 0
        buffer = b""
        while answers < count:
            chunk = conn.recv(1 << 16)
            assert chunk, "the node closed the control connection"
            buffer += chunk
            answers += chunk.count(b"\n")
        sender.join()
    assert buffer.count(b'"ok": true') == count
    return time.monotonic() - start


def test_xid_storm_is_bounded_first_occurrence_out_and_sampling_stays_on_time(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    interval = 0.25
    args = [*config_args(tmp_path, "health: {storm_window: 1.0}\n"),
            "--interval", str(interval), "--export-interval", str(interval)]
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, four_gpu_node.env, args)
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: s.points("hw.power", {"hw.id": UUIDS[3]}), timeout=20)
        started = time.time()
        samples = {uuid: _samples_since(store, uuid, started) for uuid in UUIDS[:4]}
        took = xid_burst(four_gpu_node.socket_path, 2, 13, 10_000)
        # The storm is folded into summaries: wait for the counter to settle (its last XID
        # counted and summarised), however long a loaded machine takes to get there.
        store.wait_for(lambda s: (c := s.latest("gpu.xid.errors", {"hw.id": UUIDS[2]}))
                       and c.value >= 1000 and c.value == 1 + sum(
                           int(e.attributes.get("gpu.event.count", 0))
                           for e in s.logs("gpu.xid", {"hw.id": UUIDS[2]})),
                       timeout=60, what="the storm counted and summarised")
        ended = time.time()
        storm = store.logs("gpu.xid", {"hw.id": UUIDS[2]})
        # First occurrence out as itself (not held for a summary), then at most one summary
        # per 1 s window. How fast it leaves is measured by the benchmark suite.
        assert storm, store.summary()
        first = storm[0]
        assert "gpu.event.count" not in first.attributes
        assert first.attributes["gpu.event.source"] == "nvml"
        assert first.received_at >= started
        assert all("gpu.event.count" in e.attributes for e in storm[1:])
        assert len(storm) <= 2 + int(ended - started)
        summarised = sum(int(e.attributes.get("gpu.event.count", 0)) for e in storm)
        counter = store.latest("gpu.xid.errors", {"hw.id": UUIDS[2], "gpu.xid.code": 13})
        assert counter is not None and counter.value >= 1000
        assert summarised + 1 == counter.value  # every counted XID is in an event's count
        # Sampling went on on every GPU during and after the storm: each one's samples keep
        # increasing (its cadence under load is the benchmark suite's missed_cycles).
        # Eventually, not by a deadline: on a loaded machine the storm may settle before the
        # next sample of a GPU is exported.
        for uuid in UUIDS[:4]:
            store.wait_for(lambda s, u=uuid: _samples_since(s, u, started) > samples[u],
                           timeout=60, what=f"GPU {uuid} sampling during the storm")
            during = _samples_since(store, uuid, started)
            store.wait_for(lambda s, u=uuid, n=during: _samples_since(s, u, started) > n,
                           timeout=60, what=f"GPU {uuid} still sampling after the storm")
    finally:
        agent.shutdown()
        agent.close()
    print(f"storm: {len(storm)} event(s) for {counter.value} XIDs counted "
          f"(10000 injected in {took:.2f}s)")


def _samples_since(store: Store, uuid: str, since: float) -> int:
    """Distinct sampling times of ``uuid`` at or after ``since`` (wall clock, seconds)."""
    return len({p.time_unix_nano for p in store.points("hw.gpu.utilization", {"hw.id": uuid})
                if p.time_unix_nano / 1e9 >= since})


def test_polled_health_becomes_transitions(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node = four_gpu_node
    args = config_args(tmp_path, "groups: {slow: {interval: 0.25}}\n") + FAST
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args)
    store = otlp_grpc_receiver.store
    try:
        store.wait_for(lambda s: s.points("gpu.performance_state", {"hw.id": UUIDS[0]}),
                       timeout=20)
        node.command({"op": "set", "device": 0, "values": {"clocks_event_reasons": 0x40}})
        start = one(store, "gpu.throttle", **{"hw.id": UUIDS[0], "gpu.throttle.state": "start"})
        assert start.attributes["gpu.clock.throttle.reason"] == "hw_thermal_slowdown"
        node.command({"op": "set", "device": 0, "values": {"clocks_event_reasons": 0}})
        one(store, "gpu.throttle", **{"hw.id": UUIDS[0], "gpu.throttle.state": "end"})

        node.command({"op": "set", "device": 1, "values": {"retired_pages_pending": 1}})
        degraded = one(store, "gpu.health", **{"hw.id": UUIDS[1], "hw.state": "degraded"})
        assert "retired pages pending" in str(degraded.attributes["gpu.health.reason"])
        store.wait_for(lambda s: (p := s.latest("hw.status", {"hw.id": UUIDS[1],
                                                              "hw.state": "degraded"}))
                       and p.value == 1, timeout=5, what="hw.status degraded")
        node.command({"op": "set", "device": 1, "values": {"retired_pages_pending": 0}})
        one(store, "gpu.health", **{"hw.id": UUIDS[1], "hw.state": "ok"})
    finally:
        agent.shutdown()
        agent.close()


def test_a_full_spool_keeps_the_first_events_and_reports_the_overflow(
    four_gpu_node: SimulatedNode, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    node = four_gpu_node
    args = config_args(tmp_path, "health: {spool_max_mib: 0.01}\n") + FAST  # ~10 KiB
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args,
                         env={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    store = otlp_grpc_receiver.store
    codes = (13, 31, 43, 45, 68, 69, 70, 71, 72, 73)  # all leave the GPU ok: XID events only
    fired = [(device, code) for code in codes for device in range(4)]
    try:
        store.wait_for(lambda s: s.points("hw.power"), timeout=20)
        otlp_grpc_receiver.stop()
        for device, code in fired:
            node.command({"op": "xid", "device": device, "code": code})
        # Full, and the collector seen away: what did not fit is dropped (were the collector
        # back before the agent saw it fail, that would have gone out live instead).
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (
                "is full" in agent.log() and "event export failed" in agent.log()):
            time.sleep(0.1)
        otlp_grpc_receiver.start()
        dropped = store.wait_for(
            lambda s: (p := s.latest("gpu_agent.events.dropped")) and p.value > 0 and p,
            timeout=20, what="the dropped-events metric")
        store.wait_for(_xids, timeout=20, what="the spooled XIDs")
        time.sleep(1.0)  # the spool drains in one go; wait for any stragglers anyway
        arrived = _xids(store)
        # Bounded: only what fitted arrived; the rest is counted, nothing twice.
        assert 0 < len(arrived) < len(fired)
        assert len(arrived) + dropped.value >= len(fired)
        assert len(set(arrived)) == len(arrived)
        # The first events of the outage are the ones kept.
        assert (UUIDS[0], 13) in arrived
    finally:
        agent.shutdown()
        agent.close()
    assert agent.log().count("is full") == 1, agent.log()


def test_kernel_log_reader_sleeps_until_a_record_and_stops_when_told() -> None:
    """The reader blocks in poll() with no timeout: a record wakes it, and stop() (which
    closes its pipe) must end the thread although no record follows."""
    if not _kmsg_writable():
        pytest.skip("writing /dev/kmsg needs root")
    import queue
    import threading

    from gpu_otel_agent.plugins.nvidia.kmsg import KmsgXidReader

    domain = 0x5B00 + (time.monotonic_ns() // 1000) % 0xFF
    reader = KmsgXidReader({f"0000{domain:04X}:3B:00.0": "GPU-kmsg"})
    batches: queue.SimpleQueue[list[object]] = queue.SimpleQueue()
    before = set(threading.enumerate())
    reader.start(lambda batch: batches.put(list(batch)))
    (thread,) = [t for t in threading.enumerate() if t not in before]
    assert thread.name == "kmsg-xid"
    _kmsg(f"NVRM: Xid (PCI:{domain:04x}:3b:00): 48, pid=1, name=x, DBE")
    (event,) = batches.get(timeout=30)
    assert getattr(event, "code", None) == 48 and getattr(event, "uuid", None) == "GPU-kmsg"
    reader.stop()
    thread.join(timeout=30)
    assert not thread.is_alive()
    reader.stop()  # a second stop is harmless
