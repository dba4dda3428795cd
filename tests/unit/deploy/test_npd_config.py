"""The Node Problem Detector custom-plugin configuration the chart ships, read against NPD's own
config types (kubernetes/node-problem-detector v1.36.0, pkg/custompluginmonitor/types): known
keys only, each permanent rule tied to a declared condition, durations NPD parses, and every
rule's args a valid `gpu-agent npd` command line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpu_otel_agent.cli import build_parser
from gpu_otel_agent.gpu_health.subsystems import SUBSYSTEMS

CONFIG = Path(__file__).resolve().parents[3] / "helm" / "gpu-otel-agent" / "files" / \
    "npd-gpu-monitor.json"
# json tags of CustomPluginConfig, pluginGlobalConfig, types.Condition and CustomRule (v1.36.0)
TOP = {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
PLUGIN = {"invoke_interval", "timeout", "max_output_length", "concurrency",
          "enable_message_change_based_condition_update", "skip_initial_status"}
CONDITION = {"type", "reason", "message"}
RULE = {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
DURATION = re.compile(r"^[0-9]+(ms|s|m|h)$")


def load() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(CONFIG.read_text(encoding="utf-8"))
    return config


def test_only_keys_npd_knows() -> None:
    config = load()
    assert set(config) <= TOP and config["plugin"] == "custom"
    assert set(config["pluginConfig"]) <= PLUGIN
    assert all(set(c) <= CONDITION for c in config["conditions"])
    assert all(set(r) <= RULE for r in config["rules"])


def test_every_rule_has_its_condition_and_a_timeout_within_the_global_one() -> None:
    config = load()
    conditions = {c["type"] for c in config["conditions"]}
    rules = config["rules"]
    assert {r["condition"] for r in rules} == conditions
    assert all(r["type"] == "permanent" for r in rules)
    assert DURATION.match(config["pluginConfig"]["invoke_interval"])
    assert config["pluginConfig"]["max_output_length"] == 80  # what gpu-agent npd fits in
    for rule in rules:  # NPD rejects a rule timeout above the global one
        assert DURATION.match(rule["timeout"]) and rule["timeout"] <= config["pluginConfig"][
            "timeout"]


def test_every_subsystem_has_a_condition_and_each_rule_is_a_valid_command() -> None:
    parser = build_parser()
    judged = set()
    for rule in load()["rules"]:
        assert rule["path"] == "/opt/gpu-otel-agent/bin/gpu-agent"  # the image's venv
        args = parser.parse_args(rule["args"])
        assert args.command == "npd"
        assert str(args.socket) == "/run/gpu-otel-agent/agent.sock"
        judged.update(args.subsystem or ())
        if args.subsystem is None:
            assert args.at_least == "failed"
    assert judged == set(SUBSYSTEMS)
