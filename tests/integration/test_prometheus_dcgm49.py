"""The ``dcgm-4.9`` scheme through a real Prometheus, against the ``dcgm`` (<= 4.8) scheme.

The node of test_prometheus_scrape.py (four H100s with pods in real cgroups, a MIG A100 with a
pod on an instance, a CPX MI300X with a pod on a partition), served by two agents, ``dcgm`` and
``dcgm-4.9``, each scraped by a Prometheus of its own: the 4.9 one loads the generated 4.9 alert
rules (time-scaled), so a rule cannot hide behind the other scheme's series. What is checked:
every renamed series reaches Prometheus under its 4.9 name with the <= 4.8 value times the
table's factor (and the simulated values in 4.9's units); every shipped 4.9 expression (alert
rules, Prometheus Adapter rules) returns data on the faulty node or is listed with the reason;
the alerts on renamed fields fire through Alertmanager.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
import yaml

from gpu_otel_agent.docs.dcgm49_rules import RULES_49
from gpu_otel_agent.model.dcgm_names import BY_OLD, RENAMES_49
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.cgroups import Pod, cgroups
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess, write_scenario
from tests.integration.prometheus_stack import Stack, binaries_missing
from tests.integration.test_prometheus_scrape import (
    FAULTS,
    HEALED,
    MI300X_INDEX,
    NO_DATA_HERE,
    USED_MIB,
    UTIL,
    _adapter_query,
    _agent,
    _per_gpu,
    _pods,
    _substituted,
    _values,
    faulty_node_devices,
)
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
RULES = REPO / "otel-config" / "alerts" / RULES_49
ADAPTER = REPO / "helm" / "examples" / "prometheus-adapter-values-dcgm-4.9.yaml"
NODE = "gpu-node-a"
MIB = 1024 * 1024
SCHEMES = ("dcgm", "dcgm-4.9")
H100S = 'UUID=~"' + "|".join(UUIDS[:4]) + '"'
# Labels that name where a series was scraped, not what it is.
_WHERE = {"__name__", "job", "instance"}
# What stays empty on this node in the 4.9 scheme even with the faults injected, and why:
# the same as in the dcgm scheme (test_prometheus_scrape.py), where the reasons are checked.
NO_DATA_49 = {name: why for (scheme, name), why in NO_DATA_HERE.items() if scheme == "dcgm"}


@dataclass
class Scenario:
    node: SimulatedNode
    stacks: dict[str, Stack]
    agents: dict[str, AgentProcess]
    pods: dict[str, Pod]


def _scaled_rules(workdir: Path) -> Path:
    """The 4.9 rules on a clock 60 times faster: minutes read as seconds."""
    text = RULES.read_text(encoding="utf-8")
    text = re.sub(r"(for|keep_firing_for): (\d+)m\b", r"\1: \2s", text)
    text = re.sub(r"\[(\d+)m\]", r"[\1s]", text)
    text = re.sub(r"offset (\d+)m\b", r"offset \1s", text)
    text = re.sub(r"\b(\d+) \* 60\b", r"\1 * 6", text)  # as test_prometheus_scrape scales it
    path = workdir / "gpu-alerts-dcgm-4.9.scaled.rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    missing = binaries_missing()
    if missing:
        pytest.skip(missing)
    workdir = tmp_path_factory.mktemp("prometheus-dcgm49")
    devices = faulty_node_devices()
    scenario_file = write_scenario(workdir, {"driver_version": "580.95.05",
                                             "amd_driver_version": "6.10.5",
                                             "devices": devices})
    agents: dict[str, AgentProcess] = {}
    with SimulatedNode.start(scenario_file, state_dir=workdir / "node") as node, \
            OtlpGrpcReceiver() as receiver, cgroups() as groups, \
            FakeKubelet(workdir / "kubelet" / "kubelet.sock") as kubelet:
        try:
            pods = _pods(groups, node, kubelet)
            ports = {scheme: free_port() for scheme in SCHEMES}
            for scheme, port in ports.items():
                agents[scheme] = _agent(workdir, node, receiver, scheme=scheme, port=port,
                                        kubelet=kubelet.socket_path)
            stacks: dict[str, Stack] = {}
            try:
                for scheme, port in ports.items():
                    home = workdir / scheme
                    home.mkdir()
                    rules = [_scaled_rules(workdir)] if scheme == "dcgm-4.9" else []
                    stacks[scheme] = Stack(home, {f"gpu-agent-{scheme}": f"127.0.0.1:{port}"},
                                           rules)
                yield Scenario(node, stacks, agents, pods)
            finally:
                for stack in stacks.values():
                    stack.close()
        finally:
            for agent in agents.values():
                agent.close()


def _by_identity(result: list[dict[str, Any]]) -> dict[frozenset[tuple[str, str]], float]:
    """A query's series by their labels (the driver label under 4.9's name), scrape labels
    left out."""
    renamed = BY_OLD["DCGM_FI_DRIVER_VERSION"].new
    return {frozenset((renamed if k == "DCGM_FI_DRIVER_VERSION" else k, v)
                      for k, v in r["metric"].items() if k not in _WHERE):
            float(r["value"][1]) for r in result}


def _counted(n: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda result: len(result) == n


def _still(stack: Stack, power: str, energy: str) -> None:
    """Wait until no GPU draws power and ``energy`` stopped moving (no change in 10 s)."""
    stack.wait_query(f"max({power})", lambda r: bool(r) and float(r[0]["value"][1]) == 0,
                     timeout=60)
    stack.wait_query(f"{energy}", bool, timeout=30)
    stack.wait_query(f"count(changes({energy}[10s]) > 0) or vector(0)",
                     lambda r: bool(r) and float(r[0]["value"][1]) == 0, timeout=90)


def test_every_renamed_series_is_the_dcgm_value_times_the_factor(scenario: Scenario) -> None:
    """Through both Prometheus: each series a <= 4.8 name has in the dcgm scheme is in the
    dcgm-4.9 one under the 4.9 name, with the same labels and the value times the factor.
    The energy counters are stopped first (no power drawn) so both agents read the same."""
    old, new = scenario.stacks["dcgm"], scenario.stacks["dcgm-4.9"]
    new.wait_query('DCGM_CUSTOM_PROCESS_MEM_USED{PodName="rocm-a"}', bool, timeout=30)
    power = old.wait_query("DCGM_FI_DEV_POWER_USAGE", bool)
    # An AMD GPU's socket power (and energy) is its partition 0's (the node's set command).
    # Node devices: the NVIDIA GPUs by their index (nvidiaN), the one MI300X by its place.
    watts = {(MI300X_INDEX, True) if r["metric"]["device"].startswith("amd")
             else (int(r["metric"]["gpu"]), False): float(r["value"][1]) for r in power}
    assert len(watts) == 6, watts

    def set_power(device: tuple[int, bool], value: float) -> dict[str, Any]:
        where = {"partition": 0} if device[1] else {}
        return scenario.node.command({"op": "set", "device": device[0], **where,
                                      "values": {"power_w": value}})

    for device in watts:
        assert set_power(device, 0)["ok"], device
    try:
        _still(old, "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        _still(new, "DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_DEV_BOARD_ENERGY_JOULES_TOTAL")
        compared = []
        for row in RENAMES_49:
            if row.label:
                continue
            before = _by_identity(old.query(row.old))
            if not before:
                continue
            after = _by_identity(new.wait_query(row.new, _counted(len(before))))
            assert after.keys() == before.keys(), row.new
            for identity, value in before.items():
                assert after[identity] == pytest.approx(value * row.factor, rel=1e-12,
                                                        abs=1e-9), (row.new, dict(identity))
            assert old.query(row.new) == [] and new.query(row.old) == [], row.old
            compared.append(row.old)
        # Every renamed field the agent serves (all but XID, NVLink total, graphics engine).
        assert len(compared) == 20, compared
        assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in compared
    finally:
        for device, value in watts.items():
            set_power(device, value)


def test_the_4_9_names_carry_the_simulated_values_in_4_9_units(scenario: Scenario) -> None:
    stack = scenario.stacks["dcgm-4.9"]
    util = stack.wait_query(f"DCGM_FI_DEV_GPU_UTIL_RATIO{{{H100S}}}", lambda r: len(r) >= 4)
    by_gpu = {r["metric"]["UUID"]: float(r["value"][1]) for r in util}
    assert by_gpu == {UUIDS[i]: pytest.approx(UTIL[i] / 100) for i in range(4)}
    used = stack.query(f"DCGM_FI_DEV_FB_USED_BYTES{{{H100S}}}")
    assert {r["metric"]["UUID"]: float(r["value"][1]) for r in used} == {
        UUIDS[i]: USED_MIB[i] * MIB for i in range(4)}
    # A mixed node: each device's own driver, under 4.9's label name.
    drivers = {r["metric"].get("DCGM_FI_SYSTEM_DRIVER_VERSION")
               for r in stack.query("DCGM_FI_DEV_FB_USED_BYTES")}
    assert drivers == {"580.95.05", "6.10.5"}
    assert stack.query('{DCGM_FI_DRIVER_VERSION!=""}') == []


def _adapter_queries() -> list[tuple[str, str]]:
    """(rule, PromQL) of every 4.9 Prometheus Adapter rule, expanded for a node lookup or a
    pods lookup."""
    out = []
    for rule in yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]:
        by_pod = "PodName" in rule["resources"]["overrides"]
        matchers = ('NamespaceName="ml",PodName=~"infer-a|infer-b|mig-a|rocm-a"' if by_pod
                    else f'NodeName="{NODE}"')
        name = rule.get("name", {}).get("as", rule["seriesQuery"])
        out.append((name, _adapter_query(rule, matchers, "PodName" if by_pod else "NodeName")))
    return out


def test_the_4_9_adapter_rules_return_the_simulated_values_in_4_9_units(
        scenario: Scenario) -> None:
    rules = {r["seriesQuery"]: r for r in yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]}
    stack = scenario.stacks["dcgm-4.9"]
    stack.wait_query('DCGM_FI_DEV_FB_USED_BYTES{device=~"amd.*"}', bool)
    util = _adapter_query(rules["DCGM_FI_DEV_GPU_UTIL_RATIO{}"], f'NodeName="{NODE}"',
                          "NodeName")
    per_gpu = _per_gpu(stack.query("DCGM_FI_DEV_GPU_UTIL_RATIO"), "UUID", "GPU_I_ID", mean)
    assert len(per_gpu) == 5 and max(per_gpu.values()) <= 1  # a ratio, not a percentage
    assert _values(stack.wait_query(util, bool), "NodeName") == {
        NODE: pytest.approx(mean(per_gpu.values()))}
    memory = _adapter_query(rules["DCGM_FI_DEV_FB_USED_BYTES{}"], f'NodeName="{NODE}"',
                            "NodeName")
    used = _per_gpu(stack.query("DCGM_FI_DEV_FB_USED_BYTES"), "UUID", "GPU_I_ID", sum)
    assert len(used) == 6 and sum(USED_MIB) * MIB < sum(used.values())
    assert _values(stack.query(memory), "NodeName") == {NODE: pytest.approx(sum(used.values()))}


def _rule_queries(workdir: Path) -> list[tuple[str, str]]:
    scaled = workdir / "gpu-alerts-dcgm-4.9.scaled.rules.yaml"
    return [(rule.get("alert") or rule["record"], rule["expr"])
            for group in yaml.safe_load(scaled.read_text())["groups"]
            for rule in group["rules"]]


def test_every_shipped_4_9_expression_returns_data_on_a_faulty_node(scenario: Scenario) -> None:
    """The 4.9 alert and recording rules (as loaded, scaled) and the 4.9 Prometheus Adapter
    rules, run on the 4.9 scheme's Prometheus with the faults of test_prometheus_scrape.py
    injected: each returns data, or is in NO_DATA_49 with the reason it cannot here."""
    stack = scenario.stacks["dcgm-4.9"]
    stack.wait_query('DCGM_CUSTOM_PROCESS_MEM_USED{PodName="rocm-a"}', bool, timeout=30)
    for command in FAULTS:
        assert scenario.node.command(command)["ok"], command
    try:
        queries = [*_rule_queries(stack.workdir.parent), *_adapter_queries()]
        assert len(queries) >= 20  # 15 rules, 5 adapter rules
        deadline = time.monotonic() + 40
        empty = ["?"]
        while empty and time.monotonic() < deadline:
            empty = [f"{name}: {_substituted(expr)}" for name, expr in queries
                     if name not in NO_DATA_49 and not stack.query(_substituted(expr))]
            time.sleep(1)
        assert empty == []
        for name, expr in queries:
            if name in NO_DATA_49:
                assert stack.query(_substituted(expr)) == [], name
    finally:
        for command in HEALED:
            scenario.node.command(command)


DASHBOARD = REPO / "otel-config" / "dashboards-dcgm" / "gpu-dcgm.json"


def test_the_dcgm_dashboard_shows_the_same_figures_from_either_scheme(
        scenario: Scenario) -> None:
    """Each panel of the generated dashboard returns data from both schemes' Prometheus, the
    same values for the same GPUs (4.9's units from the 4.9 name, or the <= 4.8 name times
    the factor); the energy-rate panel only has to return data (two agents, two clocks)."""
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for stack in scenario.stacks.values():
        stack.wait_query('DCGM_CUSTOM_PROCESS_MEM_USED{PodName="rocm-a"}', bool, timeout=30)
    node_variable = board["templating"]["list"][1]["query"]["query"]
    inner = node_variable.removeprefix("label_values(").rsplit(",", 1)[0]
    for stack in scenario.stacks.values():
        assert {r["metric"]["NodeName"] for r in stack.query(inner)} == {NODE}
    for panel in board["panels"]:
        expr = _substituted(panel["targets"][0]["expr"])
        rate = "rate(" in expr
        # The two agents read the node on their own clocks: poll until they agree.
        deadline = time.monotonic() + 30
        while True:
            found = {scheme: _by_identity(stack.query(expr))
                     for scheme, stack in scenario.stacks.items()}
            agree = all(found.values()) and (rate or _same(found["dcgm"], found["dcgm-4.9"]))
            if agree or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert all(found.values()), panel["title"]
        if not rate:
            assert found["dcgm"].keys() == found["dcgm-4.9"].keys(), panel["title"]
            for identity, value in found["dcgm"].items():
                assert found["dcgm-4.9"][identity] == pytest.approx(value, rel=1e-12,
                                                                    abs=1e-9), panel["title"]


def _same(a: dict[frozenset[tuple[str, str]], float],
          b: dict[frozenset[tuple[str, str]], float]) -> bool:
    return a.keys() == b.keys() and all(b[k] == pytest.approx(v, rel=1e-12, abs=1e-9)
                                        for k, v in a.items())


def _notified(stack: Stack, name: str, status: str, uuid: str) -> bool:
    return any(a["labels"]["alertname"] == name and a["status"] == status
               and uuid in (a["labels"].get("hw_id"), a["labels"].get("UUID"))
               for a in stack.webhook.alerts())


def test_the_alerts_on_renamed_fields_fire_and_resolve(scenario: Scenario) -> None:
    """GpuHighTemperature (DCGM_FI_DEV_GPU_TEMP_CELSIUS), GpuRowRemapFailure
    (DCGM_FI_DEV_ROW_REMAP_FAILED) and GpuLost (DCGM_FI_DEV_BOARD_POWER_WATTS gone) through the
    4.9 Prometheus and Alertmanager to the webhook: fired, then resolved once healed."""
    stack = scenario.stacks["dcgm-4.9"]
    faults = ({"op": "set", "device": 2, "values": {"temperature_c": 92}},
              {"op": "set", "device": 0, "values": {"remapped_rows_failure": 1}},
              {"op": "lost", "device": 3})
    healed = ({"op": "set", "device": 2, "values": {"temperature_c": 50}},
              {"op": "set", "device": 0, "values": {"remapped_rows_failure": 0}},
              {"op": "recover", "device": 3})
    expected = (("GpuHighTemperature", UUIDS[2]), ("GpuRowRemapFailure", UUIDS[0]),
                ("GpuLost", UUIDS[3]))
    for command in faults:
        assert scenario.node.command(command)["ok"], command
    try:
        for status in ("firing", "resolved"):
            deadline = time.monotonic() + 90
            missing = ["?"]
            while missing and time.monotonic() < deadline:
                missing = [f"{name} {status}" for name, uuid in expected
                           if not _notified(stack, name, status, uuid)]
                time.sleep(0.5)
            assert missing == [], [a["labels"] for a in stack.webhook.alerts()]
            if status == "firing":
                for command in healed:
                    scenario.node.command(command)
    finally:
        for command in healed:
            scenario.node.command(command)
