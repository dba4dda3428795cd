"""Real machines as the oracle: every replayable capture in ``examples/captures/`` is served by one
simulated node, one agent samples it, and what reaches a real OTLP receiver is compared with the
capture field by field through the one table of ``gpu_otel_agent/plugins/nvidia/capture/fields.py``.

A difference fails unless ``limits.DIVERGENCES`` lists it with its reason; a listed divergence
that no longer differs fails too, so the list stays true. All captures share one node and one
agent run (the suite's cost is one start-up, not one per capture).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpu_otel_agent.model.metrics import spec_for
from gpu_otel_agent.plugins.nvidia.capture import fields
from gpu_otel_agent.simulation.captures.nvidia_smi import formats
from gpu_otel_agent.simulation.captures.nvidia_smi.convert import (
    ConvertError,
    not_available,
    number,
)
from gpu_otel_agent.simulation.captures.nvidia_smi.limits import DIVERGENCES, Divergence
from gpu_otel_agent.simulation.captures.nvidia_smi.model import GpuCapture
from gpu_otel_agent.simulation.captures.registry import CaptureError, read_capture
from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.simulation.node.scenario import Scenario, load_scenario
from tests.integration.harness import REPO, AgentProcess, h100, write_scenario
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.receivers.store import Store

pytestmark = pytest.mark.integration

CAPTURES = REPO / "examples" / "captures" / "nvidia"
SCENARIO_EXAMPLES = REPO / "examples" / "scenarios"
FAST = ["--interval", "0.2", "--export-interval", "0.3"]
MIB = 1024 * 1024


def replayable() -> list[Path]:
    """The corpus files a capture format reads (the others are evidence, not node states)."""
    out = []
    for path in sorted(CAPTURES.iterdir()):
        try:
            read_capture(path)
        except CaptureError:
            continue
        out.append(path)
    return out


def _divergence(row: Row) -> Divergence | None:
    for d in DIVERGENCES:
        if fnmatch.fnmatch(row.capture.name, d.capture) and d.field == row.field and (
                d.device is None or d.device == row.device) and fnmatch.fnmatchcase(
                row.printed, d.printed):
            return d
    return None


@dataclass(frozen=True)
class Row:
    """One expected fact: (capture, device, field) -> a metric point's value or attribute, or
    no point at all (what the capture printed as not available)."""

    capture: Path
    device: int  # position in the capture
    index: int  # position on the node (gpu.index)
    field: str
    metric: str
    point: Mapping[str, object]
    expected: float | str | None  # None: the point must be absent
    printed: str
    attribute: str | None = None  # compare this attribute of the device's points
    instance: int | None = None  # a MIG GPU instance id: compare that instance's point


_ATTRIBUTES = {"model": "hw.model", "uuid": "hw.id", "pci_bus_id": "gpu.pci.bus_id"}


def expected_rows(scenario: Scenario) -> list[Row]:
    """The comparison table: every capture field that has a metric or attribute, per device;
    each MIG instance's id and memory; each process's memory."""
    rows: list[Row] = []
    offset = 0
    for fragment in scenario.captures:
        path = fragment.source
        for position, gpu in enumerate(_gpus(path)):
            index = offset + position
            for f in fields.FIELDS:
                printed = gpu.values.get(f.key)
                if printed is None or f.metric is None:
                    continue
                if f.metric.startswith("attr:"):
                    if not not_available(printed):
                        rows.append(Row(path, position, index, f.key, "hw.status", {},
                                        _attr_value(f.key, printed), printed,
                                        attribute=_ATTRIBUTES[f.key]))
                    continue
                try:
                    value = number(printed, f.kind)
                except ConvertError:  # e.g. "On" in the table's ECC column of a MIG GPU: no
                    continue  # value was printed (the reader lists it as not served)
                rows.append(Row(path, position, index, f.key, f.metric, dict(f.point),
                                None if value is None else value * f.scale, printed))
            for name, _bit, _tag, _label in fields.CLOCK_EVENT_REASONS:
                printed = gpu.clock_events.get(name)
                if printed is None or not_available(printed):
                    continue
                rows.append(Row(path, position, index, f"clock_event.{name}",
                                "gpu.clock.throttle", {"gpu.clock.throttle.reason": name},
                                1.0 if printed.strip().lower() == "active" else 0.0, printed))
            for mig in gpu.mig_devices:
                rows.append(Row(path, position, index, "mig.gpu_instance_id", "hw.status", {},
                                str(mig.gpu_instance_id), str(mig.gpu_instance_id),
                                attribute="gpu.mig.gpu_instance.id",
                                instance=mig.gpu_instance_id))
                if mig.memory_total is not None:
                    total = number(mig.memory_total)
                    rows.append(Row(path, position, index, "mig.memory_total",
                                    "hw.gpu.memory.limit", {},
                                    None if total is None else total * MIB, mig.memory_total,
                                    instance=mig.gpu_instance_id))
            for proc in gpu.processes:
                used = number(proc.used_memory) if proc.used_memory else None
                rows.append(Row(path, position, index, "process", "gpu.process.memory.usage",
                                {"process.pid": proc.pid},
                                None if used is None else used * MIB, proc.used_memory or ""))
        offset += len(fragment.devices)
    return rows


def _attr_value(key: str, printed: str) -> str:
    value = printed.strip()
    if key == "pci_bus_id" and len(value.split(":")[0]) == 4:
        value = "0000" + value
    return value.upper() if key == "pci_bus_id" else value


def _gpus(path: Path) -> tuple[GpuCapture, ...]:
    return formats.parse(path).gpus


@contextlib.contextmanager
def _served(tmp: Path, captures: list[Path]) -> Iterator[tuple[Scenario, SimulatedNode, Store]]:
    """One node serving ``captures``, one agent sampling it, one receiver; once every GPU's
    slow group has reported."""
    scenario_path = tmp / "captures.yaml"
    scenario_path.write_text(yaml.safe_dump({"capture": [str(p) for p in captures]}),
                             encoding="utf-8")
    scenario = load_scenario(scenario_path)
    config = tmp / "agent.yaml"
    config.write_text("groups: {slow: {interval: 0.3}, processes: {interval: 0.3}}\n",
                      encoding="utf-8")
    with SimulatedNode.start(scenario_path, state_dir=tmp / "node") as node, \
            OtlpGrpcReceiver() as receiver:
        agent = AgentProcess(tmp, receiver.endpoint, node.env, [*FAST, "--config", str(config)])
        try:
            _wait_for_all(receiver.store, scenario)
            yield scenario, node, receiver.store
        finally:
            agent.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Scenario, SimulatedNode, Store]]:
    with _served(tmp_path_factory.mktemp("captures"), replayable()) as running:
        yield running


@pytest.fixture(scope="module")
def replayed(served: tuple[Scenario, SimulatedNode, Store]) -> tuple[Scenario, Received]:
    return served[0], Received(served[2])


def _wait_for_all(store: Store, scenario: Scenario) -> None:
    """Until every device has sent a slow-group reading twice (both groups have run)."""
    n = len(scenario.devices)

    def ready(s: Store) -> bool:
        seen: dict[int, int] = {}
        for p in s.points("gpu.clock.throttle"):
            index = p.attributes.get("gpu.index")
            if isinstance(index, int) and "hw.parent" not in p.attributes:
                seen[index] = seen.get(index, 0) + 1
        return len([i for i, c in seen.items() if c >= 2 * 9]) >= n

    store.wait_for(ready, timeout=90, what=f"slow-group readings from all {n} GPUs")


class Received:
    """What a receiver holds at one moment, grouped by metric (comparing hundreds of rows
    against a store the agent keeps filling would rescan it for each row)."""

    def __init__(self, store: Store) -> None:
        self._by_metric: dict[str, list[Point]] = {}
        for point in store.points():
            self._by_metric.setdefault(point.metric, []).append(point)

    def points(self, metric: str, wanted: Mapping[str, object] | None = None) -> list[Point]:
        return [p for p in self._by_metric.get(metric, [])
                if all(p.attributes.get(k) == v for k, v in (wanted or {}).items())]

    def latest(self, metric: str, wanted: Mapping[str, object] | None = None) -> Point | None:
        found = self.points(metric, wanted)
        return max(found, key=lambda p: p.time_unix_nano) if found else None


def _points(store: Received, row: Row) -> list[Point]:
    if row.instance is None:
        wanted = {"gpu.index": row.index, **row.point}
        # The GPU's own points, not its MIG instances' (a fan, a component of its own, has
        # the GPU as hw.parent too).
        return [p for p in store.points(row.metric, wanted)
                if "gpu.mig.gpu_instance.id" not in p.attributes]
    parent = store.latest("hw.status", {"gpu.index": row.index})
    uuid = parent.attributes.get("hw.id") if parent is not None else None
    instances = [p for p in store.points(row.metric, dict(row.point))
                 if p.attributes.get("hw.parent") == uuid]
    if row.attribute is not None:  # is there an instance of that id at all
        return [p for p in instances
                if str(p.attributes.get("gpu.mig.gpu_instance.id")) == row.expected]
    return [p for p in instances if p.attributes.get("gpu.mig.gpu_instance.id") == row.instance]


def compare(store: Received, row: Row) -> tuple[bool, object]:
    points = _points(store, row)
    if row.attribute is not None:
        actual: object = points[-1].attributes.get(row.attribute) if points else None
        return str(actual) == row.expected, actual
    if row.expected is None:
        return not points, [p.value for p in points[-1:]]
    actual = points[-1].value if points else None
    ok = isinstance(actual, int | float) and math.isclose(
        float(actual), float(row.expected), rel_tol=1e-6, abs_tol=1e-6)
    return ok, actual


def test_every_replayable_capture_is_served(replayed: tuple[Scenario, Received]) -> None:
    """The node serves exactly the corpus files INDEX.md marks as replayed."""
    scenario, _ = replayed
    files = {f.source.name for f in scenario.captures}
    assert files == {p.name for p in replayable()}
    index = (CAPTURES.parent / "INDEX.md").read_text(encoding="utf-8")
    marked = {name for name, replayed_col in re.findall(
        r"^\| `nvidia/([^`]+)` \|.*\| (?:full|fragment), (yes|no)\b[^|]*\|$", index, re.M)
        if replayed_col == "yes"}
    assert files == marked
    assert len(files) >= 8


def test_capture_fields_arrive_as_printed(replayed: tuple[Scenario, Received]) -> None:
    """The table, row by row: a difference fails unless listed; a listed one must differ."""
    scenario, store = replayed
    failures: list[str] = []
    listed_ok: dict[Divergence, bool] = {}
    rows = expected_rows(scenario)
    assert len(rows) > 300  # the table is not empty by accident
    for row in rows:
        ok, actual = compare(store, row)
        listed = _divergence(row)
        if listed is not None:
            listed_ok[listed] = listed_ok.get(listed, True) and ok
            continue
        if not ok:
            failures.append(f"{row.capture.name} GPU {row.device} {row.field} "
                            f"(printed {row.printed!r}) -> {row.metric}{dict(row.point)}"
                            f"{' ' + row.attribute if row.attribute else ''}: "
                            f"expected {row.expected!r}, got {actual!r}")
    stale = [d for d, all_ok in listed_ok.items() if all_ok]
    unused = [d for d in DIVERGENCES if d not in listed_ok]
    assert not failures, "\n".join(failures)
    assert not stale, f"listed divergences that no longer differ (remove them): {stale}"
    assert not unused, f"listed divergences that match no capture field: {unused}"


def test_the_comparison_can_fail(replayed: tuple[Scenario, Received]) -> None:
    """Every row that matches would not match a different value: no row passes vacuously."""
    scenario, store = replayed
    for row in expected_rows(scenario):
        if _divergence(row) is not None:
            continue
        if isinstance(row.expected, float):
            wrong = dataclasses.replace(row, expected=row.expected * 2 + 1)
        elif isinstance(row.expected, str):
            wrong = dataclasses.replace(row, expected=row.expected + "x")
        else:  # absent: the same metric must be present on some other device of the node
            assert store.points(row.metric, dict(row.point)), row
            continue
        assert not compare(store, wrong)[0], wrong


def test_driver_version_of_the_first_capture_is_the_node_s(
        replayed: tuple[Scenario, Received]) -> None:
    """One driver per node: the first capture's (the others' are compared in unit tests)."""
    scenario, store = replayed
    first = next(f for f in scenario.captures if "driver_version" in f.system)
    # On each device's points (hw.driver_version), not the resource.
    drivers = {p.attributes.get("hw.driver_version") for p in store.points("hw.status")}
    assert drivers == {first.system["driver_version"]}


def test_the_metric_table_names_catalog_metrics() -> None:
    for f in fields.FIELDS:
        if f.metric is not None and not f.metric.startswith("attr:"):
            assert spec_for(f.metric).name == f.metric


def _capture(env: Mapping[str, str], out: Path, *extra: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "capture", "--out",
                           str(out), *extra], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8")


def test_capture_of_the_node_replays_to_the_same_export(
        served: tuple[Scenario, SimulatedNode, Store], tmp_path: Path) -> None:
    """gpu-agent capture of the captures' node -> a node from that capture -> the agent exports
    on both what the written capture says, row by row through the same table."""
    scenario, node, live_a = served
    written = tmp_path / "node.xml"
    _capture(node.env, written)
    store_a = Received(live_a)
    with _served(tmp_path, [written]) as (scenario_b, _node_b, live_b):
        store_b = Received(live_b)
        assert len(scenario_b.devices) == len(scenario.devices)
        rows = expected_rows(scenario_b)
        assert len(rows) > 300
        failures = []
        for row in rows:
            for name, store in (("original node", store_a), ("replayed capture", store_b)):
                ok, actual = compare(store, row)
                if not ok:
                    failures.append(f"{name}: GPU {row.index} {row.field} {row.metric}"
                                    f"{dict(row.point)}: written {row.printed!r}, exported "
                                    f"{actual!r}")
        assert not failures, "\n".join(failures)


def test_capture_scrubs_process_names_unless_asked(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {"devices": [h100(0)], "processes": [
        {"device": 0, "spawn": None, "used_memory_mib": 512}]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        scrubbed = _capture(node.env, tmp_path / "scrubbed.xml")
        kept = _capture(node.env, tmp_path / "kept.xml", "--keep-names")
    assert "<process_name>[scrubbed]</process_name>" in scrubbed
    assert "<process_name>sleep</process_name>" not in scrubbed
    assert "<process_name>sleep</process_name>" in kept
    assert "<used_memory>512 MiB</used_memory>" in scrubbed


_CLIENT = """
import json, pynvml as N
N.nvmlInit()
out = []
for i in range(N.nvmlDeviceGetCount()):
    h = N.nvmlDeviceGetHandleByIndex(i)
    try:
        fan = N.nvmlDeviceGetFanSpeed(h)
    except N.NVMLError as e:
        fan = type(e).__name__
    out.append({"uuid": N.nvmlDeviceGetUUID(h), "serial": N.nvmlDeviceGetSerial(h),
                "vbios": N.nvmlDeviceGetVbiosVersion(h), "fan": fan,
                "minor": N.nvmlDeviceGetMinorNumber(h)})
print(json.dumps({"driver": N.nvmlSystemGetDriverVersion(), "gpus": out}))
"""


def test_sim_up_serves_captures_to_any_nvml_client(tmp_path: Path) -> None:
    """``gpu-agent sim up --capture A --capture B``: a plain pynvml client sees both machines'
    GPUs in order, ids as printed, and N/A as NVML_ERROR_NOT_SUPPORTED."""
    t4, h100 = CAPTURES / "tesla-t4-processes.q.xml", CAPTURES / "h100-sxm-x8-535.161.08.q.txt"
    env = {k: v for k, v in os.environ.items() if k != "GPU_SIM_SOCKET"}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_otel_agent.cli", "sim", "up", "--capture", str(t4),
         "--capture", str(h100), "--dir", str(tmp_path / "node")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline() or "{}")
        assert ready.get("ready"), proc.stderr.read() if proc.stderr else ready
        done = subprocess.run([sys.executable, "-c", _CLIENT], env={**env, **ready["env"]},
                              capture_output=True, text=True, timeout=60, check=True)
        seen = json.loads(done.stdout)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert seen["driver"] == "515.105.01"  # the first capture's
    gpus = seen["gpus"]
    assert len(gpus) == 9
    assert gpus[0] == {"uuid": "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
                       "serial": "0000000000000", "vbios": "90.04.84.00.06",
                       "fan": "NVMLError_NotSupported", "minor": 0}
    assert gpus[2]["uuid"] == "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00"
    assert gpus[2]["serial"] == "1650124008135" and gpus[2]["minor"] == 1
    assert all(g["fan"] == "NVMLError_NotSupported" for g in gpus)  # "Fan Speed : N/A"


def test_capture_without_a_driver_says_so_and_writes_nothing(
        served: tuple[Scenario, SimulatedNode, Store], tmp_path: Path) -> None:
    _scenario, node, _store = served
    out = tmp_path / "never.xml"
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "capture", "--out",
                           str(out)], env={**os.environ, **node.env,
                                           "GPU_SIM_NODE": str(tmp_path / "no-node")},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "cannot open NVML" in done.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_scenario_adds_a_timeline_on_top_of_a_capture(tmp_path: Path) -> None:
    """examples/scenarios/captured-h100-xid79.yaml: the fourth captured H100 (its UUID as
    printed) gets the timeline's XID 79; the job the scenario adds runs on the first."""
    example = SCENARIO_EXAMPLES / "captured-h100-xid79.yaml"
    scenario = load_scenario(example)
    fourth = scenario.devices[3].uuid
    assert fourth == "GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99"
    with SimulatedNode.start(example, state_dir=tmp_path / "node") as node, \
            OtlpGrpcReceiver() as receiver:
        agent = AgentProcess(tmp_path, receiver.endpoint, node.env, FAST)
        try:
            store = receiver.store
            xid = store.wait_for(lambda s: s.latest("gpu.xid.errors", {
                "hw.id": fourth, "gpu.xid.code": 79}), timeout=60, what="XID 79 on GPU 3")
            assert xid.value >= 1
            assert store.wait_for(lambda s: s.points("gpu.process.memory.usage", {
                "gpu.index": 0}), timeout=30, what="the job on GPU 0")[-1].value == 70000 * MIB
            assert not store.points("gpu.xid.errors", {"gpu.index": 0})
        finally:
            agent.close()


def test_capture_of_amd_gpus_reads_back_as_them(tmp_path: Path) -> None:
    """gpu-agent capture --vendor amd writes amd-smi JSON (the AMD reader's format) of the node's
    AMD GPUs; read back, it names the same GPUs."""
    scenario = write_scenario(tmp_path, {"devices": [
        {"vendor": "amd", "model": "AMD Instinct MI300X"},
        {"vendor": "amd", "model": "AMD Instinct MI210"}]})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        text = _capture(node.env, tmp_path / "amd.json", "--vendor", "amd")
    assert '"gpu_data"' in text
    fragment = read_capture(tmp_path / "amd.json")
    assert fragment.vendor == "amd"
    assert [d["model"] for d in fragment.devices] == ["AMD Instinct MI300X", "AMD Instinct MI210"]


def test_a_mig_layout_survives_capture_and_replay(tmp_path: Path) -> None:
    """examples/scenarios/a100-mig.yaml (GPU instances 2, 9, 10 as a real A100 numbered them; a
    3g.40gb with two compute instances; MIG device indices 3-4 empty) -> gpu-agent capture ->
    the capture read back as a scenario: the same GPU instance ids, compute instances, MIG
    device indices, instance memory, and processes on the same compute instances."""
    example = SCENARIO_EXAMPLES / "a100-mig.yaml"
    original = load_scenario(example)
    with SimulatedNode.start(example, state_dir=tmp_path / "node") as node:
        _capture(node.env, tmp_path / "mig.xml")
    replayed = load_scenario(None, [tmp_path / "mig.xml"])

    def layout(s: Scenario) -> list[tuple[object, ...]]:
        gpu = s.devices[0]
        assert gpu.mig is not None
        return [(m.profile, m.gpu_instance_id, len(m.compute_instances)) for m in gpu.mig]

    assert layout(replayed) == [("3g.40gb", 2, 2), ("1g.10gb", 9, 1), ("1g.10gb", 10, 1)]
    assert [m.profile for m in original.devices[0].mig or ()] == [
        m.profile for m in replayed.devices[0].mig or ()]
    mig = replayed.devices[0].mig or ()
    assert [c.profile for c in mig[0].compute_instances] == ["2c.3g.40gb", "1c.3g.40gb"]
    assert mig[2].compute_instances[0].mig_index == 5  # the hole at 3-4 kept
    placed = sorted((p.mig, p.ci, p.used_memory_mib) for p in replayed.processes
                    if p.device == 0)
    assert placed == [(0, 0, 12000.0), (0, 1, 2000.0), (1, None, 3000.0)]
