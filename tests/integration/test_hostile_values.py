"""Values the wire cannot carry, sent by a GPU or the kernel log, against a running agent.

OTLP carries an integer as a signed 64-bit number (``NumberDataPoint.as_int``, ``AnyValue``'s
``int_value``): a counter a GPU serves at 2^64-1 or an XID code of 2^63 in a kernel-log line
has no encoding. One such value must cost its own point, never the export of every other.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.25", "--export-interval", "0.25"]
U64_MAX = 2**64 - 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(tmp_path: Path, port: int | None = None) -> list[str]:
    path = tmp_path / "agent.yaml"
    text = "groups.slow.interval: 0.5\n"
    if port is not None:
        text += f"prometheus: {{enabled: true, listen: '127.0.0.1:{port}'}}\n"
    path.write_text(text, encoding="utf-8")
    return ["--config", str(path), *FAST]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def _fresh(store: Store, metric: str, uuid: str, after: float) -> bool:
    return any(p.received_at > after for p in store.points(metric, {"hw.id": uuid}))


def test_a_counter_at_2_64_minus_1_costs_its_point_only(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    scenario = write_scenario(tmp_path, {"devices": [h100(0, uuid=UUIDS[0]),
                                                      h100(1, uuid=UUIDS[1])]})
    store = otlp_grpc_receiver.store
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        port = _free_port()
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             _config(tmp_path, port))
        try:
            store.wait_for(lambda s: s.points("hw.errors", {"hw.id": UUIDS[1]}), timeout=30)
            # The simulated library saturates: 2^64 is served as 2^64-1 (ULLONG_MAX).
            node.command({"op": "set", "device": 1, "values": {"ecc_sbe_volatile": 2.0**64}})
            after = time.time() + 1.0  # past the next slow read
            # Every GPU's other points go on: the export carrying them is not refused.
            store.wait_for(lambda s: _fresh(s, "hw.errors", UUIDS[0], after)
                           and _fresh(s, "hw.power", UUIDS[1], after)
                           and _fresh(s, "hw.errors", UUIDS[1], after), timeout=30,
                           what="fresh points of both GPUs after the out-of-range counter")
            # The other ECC point of GPU 1 (uncorrected) still arrives; the corrected one,
            # with no encoding, does not.
            late = [p for p in store.points("hw.errors", {"hw.id": UUIDS[1]})
                    if p.received_at > after]
            assert {p.attributes["error.type"] for p in late} == {"uncorrected"}
            dropped = store.wait_for(
                lambda s: [p for p in s.points("gpu_agent.readings.dropped") if p.value >= 1],
                timeout=30, what="gpu_agent.readings.dropped >= 1")
            assert dropped[-1].value == 1  # one series, counted once however many exports
            # Prometheus shows the same series: GPU 1's corrected count is left out, the
            # rest of the scrape is there.
            text = _scrape(port)
            errors = [line for line in text.splitlines() if line.startswith("hw_errors")]
            assert any(UUIDS[0] in line and 'error_type="corrected"' in line for line in errors)
            assert not any(UUIDS[1] in line and 'error_type="corrected"' in line
                           for line in errors), errors
            assert any(UUIDS[1] in line for line in errors)
            log = agent.log()
            assert "Traceback" not in log
            assert log.count(str(U64_MAX)) == 1, log  # said once, with the value
        finally:
            agent.shutdown()
            agent.close()


def _kmsg_writable() -> bool:
    try:
        with open("/dev/kmsg", "w"):
            return True
    except OSError:
        return False


def test_a_kernel_log_xid_code_of_2_63_stops_no_export(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    if not _kmsg_writable():
        pytest.skip("writing /dev/kmsg needs root")
    # A PCI domain no real GPU and no other test uses, so only this agent maps the line.
    domain = 0x5B00 + (time.monotonic_ns() // 1000) % 0xFF
    bus_id = f"0000{domain:04X}:3B:00.0"
    scenario = write_scenario(tmp_path, {"devices": [
        h100(0, uuid=UUIDS[0]), h100(1, uuid=UUIDS[1], pci_bus_id=bus_id)]})
    store = otlp_grpc_receiver.store
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env, FAST)
        try:
            store.wait_for(lambda s: s.points("hw.power", {"hw.id": UUIDS[1]}), timeout=30)
            time.sleep(0.5)  # the reader starts at the end of the log
            for code in (2**63, 31):  # one write, one kernel-log record, each
                with open("/dev/kmsg", "w") as kmsg:
                    kmsg.write(f"NVRM: Xid (PCI:{domain:04x}:3b:00): {code}, pid=1, name=x, "
                               "crafted\n")
            # The real XID after it is reported, and counted in the metrics.
            store.wait_for(lambda s: s.logs("gpu.xid", {"hw.id": UUIDS[1], "gpu.xid.code": 31}),
                           timeout=30, what="the XID after the crafted line")
            store.wait_for(lambda s: s.points("gpu.xid.errors",
                                              {"hw.id": UUIDS[1], "gpu.xid.code": 31}),
                           timeout=30, what="gpu.xid.errors of the XID after it")
            after = time.time() + 1.0
            store.wait_for(lambda s: _fresh(s, "hw.power", UUIDS[0], after)
                           and _fresh(s, "hw.power", UUIDS[1], after), timeout=30,
                           what="fresh points of both GPUs after the crafted line")
            assert not [e for e in store.logs("gpu.xid") if e.attributes.get("gpu.xid.code")
                        not in (31,)]
            assert "Traceback" not in agent.log()
        finally:
            agent.shutdown()
            agent.close()
