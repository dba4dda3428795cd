"""XIDs as the driver writes them, end to end to a real OTLP receiver.

Kernel-log lines are written to the real ``/dev/kmsg`` (root only, as the existing kmsg tests),
in the forms real drivers print (leptonai/gpud PRs 1160 and 1174 for XID 144-150 lines,
NVIDIA/nvtrust issue 124 for an NVSwitch SXID); each names a PCI domain no real device and no
other test uses, so only this test's agent maps it. A storm of XIDs on one MIG instance is
summarised on that instance, live and after a ``kill -9``.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import LogEvent
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]


def _kmsg_writable() -> bool:
    try:
        with open("/dev/kmsg", "w"):
            return True
    except OSError:
        return False


def _kmsg(line: str) -> None:
    with open("/dev/kmsg", "w") as kmsg:
        kmsg.write(line + "\n")


def _domain(base: int) -> int:
    return base + (time.monotonic_ns() // 1000) % 0xFF


def _one(store: Store, name: str, what: str, **attrs: object) -> LogEvent:
    return store.wait_for(lambda s: s.logs(name, attrs), timeout=30, what=what)[0]


def test_nvlink_xid_lines_and_an_sxid_arrive_with_severity_and_link_from_the_line(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    if not _kmsg_writable():
        pytest.skip("writing /dev/kmsg needs root")
    domain, switch_domain = _domain(0x5C00), _domain(0x5D00)
    scenario = write_scenario(tmp_path, {"devices": [
        h100(0, uuid=UUIDS[0]), h100(1, uuid=UUIDS[1], pci_bus_id=f"0000{domain:04X}:18:00.0"),
        h100(2, uuid=UUIDS[2], pci_bus_id=f"0000{domain:04X}:19:00.0")]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
        store = otlp_grpc_receiver.store
        try:
            store.wait_for(lambda s: s.points("hw.power", {"hw.id": UUIDS[2]}), timeout=30)
            time.sleep(0.5)  # the reader starts at the end of the log
            _kmsg(f"NVRM: Xid (PCI:{domain:04x}:18:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 "
                  "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)")
            nonfatal = _one(store, "gpu.xid", "the non-fatal XID 145",
                            **{"hw.id": UUIDS[1], "gpu.xid.code": 145})
            attrs = nonfatal.attributes
            assert nonfatal.severity_text == "WARN"
            assert (attrs["gpu.xid.fatal"], attrs["gpu.nvlink.link"], attrs["gpu.xid.unit"],
                    attrs["gpu.xid.subcode"]) == (False, 13, "RLW_RXPIPE", 0)
            assert attrs["gpu.xid.action"] == "WORKFLOW_NVLINK5_ERR"
            # A first occurrence an alert can see: the time of the fault, per GPU and code.
            seen = store.wait_for(lambda s: s.latest("gpu.xid.last_seen", {
                "hw.id": UUIDS[1], "gpu.xid.code": 145}), timeout=30, what="last seen 145")
            assert abs(seen.value - nonfatal.time_unix_nano / 1e9) < 1.0

            _kmsg(f"NVRM: Xid (PCI:{domain:04x}:19:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 02 "
                  "(0x0439a0c2 0x00000004 0x00000000 0x00000000 0x00000000 0x00000000)")
            fatal = _one(store, "gpu.xid", "the fatal XID 145",
                         **{"hw.id": UUIDS[2], "gpu.xid.code": 145})
            assert fatal.severity_text == "FATAL"
            assert (fatal.attributes["gpu.xid.fatal"], fatal.attributes["gpu.nvlink.link"],
                    fatal.attributes["gpu.xid.subcode"]) == (True, 2, 3)
            # The fatal one fails its GPU until a reset; the non-fatal one left its GPU ok.
            store.wait_for(lambda s: (p := s.latest("hw.status", {
                "hw.id": UUIDS[2], "hw.state": "failed"})) is not None and p.value == 1,
                timeout=30, what="GPU 2 failed")
            store.wait_for(lambda s: (p := s.latest("gpu.health.status", {
                "hw.id": UUIDS[2], "gpu.health.subsystem": "nvlink", "hw.state": "failed"}))
                is not None and p.value == 1, timeout=30, what="GPU 2's nvlink failed")
            ok = store.latest("hw.status", {"hw.id": UUIDS[1], "hw.state": "ok"})
            assert ok is not None and ok.value == 1

            pci = f"{switch_domain:04x}:04:00.0"
            _kmsg(f"nvidia-nvswitch3: SXid (PCI:{pci}): 22013, Data {{0x0000002b, 0x0000002b, "
                  "0x00000000, 0x0000002b, 0x80005302, 0x00000000, 0x00000000, 0x00000000, "
                  "0x00000000}")
            _kmsg(f"nvidia-nvswitch3: SXid (PCI:{pci}): 22013, Non-fatal, Link 44 Minion Link "
                  "DLREQ interrupt")
            _kmsg(f"nvidia-nvswitch3: SXid (PCI:{pci}): 22013, Severity 0 Engine instance 44 "
                  "Sub-engine instance 00")
            sxid = _one(store, "gpu.nvswitch.sxid", "the SXID",
                        **{"hw.id": f"nvswitch-{pci}"})
            assert sxid.severity_text == "WARN"
            assert (sxid.attributes["gpu.nvswitch.sxid.code"], sxid.attributes["gpu.nvlink.link"],
                    sxid.attributes["gpu.nvswitch.sxid.fatal"], sxid.attributes["hw.name"],
                    sxid.attributes["hw.type"]) == (22013, 44, False, "nvidia-nvswitch3",
                                                    "network")
            assert "Minion Link DLREQ interrupt" in sxid.body
            time.sleep(1.0)  # the Data and Severity lines around it are no events of their own
            assert len(store.logs("gpu.nvswitch.sxid", {"hw.id": f"nvswitch-{pci}"})) == 1
            assert not store.logs("gpu.xid", {"hw.id": UUIDS[0]})
        finally:
            agent.shutdown()
            agent.close()


MIG_SCENARIO = {"devices": [{
    "model": "NVIDIA A100-SXM4-80GB", "uuid": UUIDS[0],
    "mig": [{"profile": "3g.40gb"}, {"profile": "1g.10gb"}, {"profile": "1g.10gb"}]}]}


def _summaries(store: Store) -> list[LogEvent]:
    return [e for e in store.logs("gpu.xid", {"gpu.xid.code": 43})
            if e.attributes.get("gpu.event.source") == "summary"]


def test_a_storm_on_a_mig_instance_is_summarised_on_it_and_survives_kill_9(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    store = otlp_grpc_receiver.store
    config = tmp_path / "agent.yaml"
    with SimulatedNode.start(write_scenario(tmp_path, MIG_SCENARIO),
                             state_dir=tmp_path / "node") as node:
        # Live: a short window, the summary arrives on the instance.
        config.write_text("health: {storm_window: 1}\n", encoding="utf-8")
        args = [*FAST, "--config", str(config)]
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args)
        try:
            store.wait_for(lambda s: len({p.attributes["hw.id"] for p in s.points(
                "hw.gpu.memory.usage") if "hw.parent" in p.attributes}) == 3, timeout=30,
                what="the three instances")
            for _ in range(8):
                node.command({"op": "xid", "device": 0, "code": 43, "mig": 1})
            first = _one(store, "gpu.xid", "the instance's first XID 43",
                         **{"gpu.xid.code": 43, "hw.parent": UUIDS[0]})
            instance = first.attributes["hw.id"]
            assert str(instance).startswith("MIG-")
            summary = store.wait_for(_summaries, timeout=30, what="the live summary")[0]
            assert summary.attributes["hw.id"] == instance
            assert summary.attributes["hw.parent"] == UUIDS[0]
            assert summary.attributes["gpu.event.count"] == 7
        finally:
            agent.shutdown()
            agent.close()

        # Counted, then kill -9 before the window ends: summarised on the instance after.
        config.write_text("health: {storm_window: 600}\n", encoding="utf-8")
        exports = len(store.received("metrics"))
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args)
        try:
            # Running: its exports arrive (its NVML event sets are registered by then; an XID
            # before registration is not delivered, as on a real driver).
            store.wait_for(lambda s: len(s.received("metrics")) >= exports + 3, timeout=60,
                           what="the second agent's exports")
            for _ in range(12):
                node.command({"op": "xid", "device": 0, "code": 43, "mig": 2})
            second = store.wait_for(lambda s: [e for e in s.logs("gpu.xid", {
                "gpu.xid.code": 43, "hw.parent": UUIDS[0]}) if e.attributes["hw.id"] != instance
                and e.attributes.get("gpu.event.source") == "nvml"], timeout=30,
                what="the other instance's first XID 43")[0]
            journal = tmp_path / "event-spool" / "storm.jsonl"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and b'"c":11' not in (
                    journal.read_bytes() if journal.exists() else b""):
                time.sleep(0.05)
            assert b'"c":11' in journal.read_bytes(), agent.log()[-3000:]
            agent.process.send_signal(signal.SIGKILL)
            agent.process.wait()
            agent.close()
            before = len(_summaries(store))
            agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, args)
            after = store.wait_for(lambda s: len(x := _summaries(s)) > before and x,
                                   timeout=30, what="the summary after the restart")[-1]
        finally:
            agent.shutdown()
            agent.close()
    assert after.attributes["gpu.event.count"] == 11
    assert after.attributes["hw.parent"] == UUIDS[0]
    assert str(after.attributes["hw.id"]).startswith("MIG-")
    assert after.attributes["hw.id"] == second.attributes["hw.id"] != instance
