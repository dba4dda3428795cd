"""The configuration table: every row loads, layers in the documented order, and bad input of
every kind gets an error naming the key, where it came from and the bad value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.config.kinds import (
    AbsolutePath,
    Choice,
    Count,
    Directory,
    Flag,
    Invalid,
    ListenAddress,
    Number,
    OtlpEndpoint,
    Seconds,
    SizeMap,
    StringMap,
    Text,
)
from gpu_otel_agent.config.load import (
    ConfigError,
    Overrides,
    flatten,
    load,
    restart_needed,
    to_tree,
)
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.config.table import ANY_GROUP, TABLE, Env, Key, Reload

PLUGIN_GROUP = "extra"  # stands for a group a plugin adds: the ``groups.*`` rows


def dotted(row: Key) -> str:
    return row.key.replace(f".{ANY_GROUP}.", f".{PLUGIN_GROUP}.")


def two_values(row: Key) -> tuple[Any, Any]:
    """Two valid values that differ from each other; the first also from the default."""
    kind = row.kind
    if isinstance(kind, Flag):
        return (not row.default, bool(row.default))
    if isinstance(kind, Choice):
        others = [c for c in kind.choices if c != row.default]
        return (others[0], kind.choices[0] if others[0] != kind.choices[0] else kind.choices[1])
    if isinstance(kind, Seconds):
        return (7.25, 8.5)
    if isinstance(kind, Number):
        span = kind.high - kind.low
        return (kind.low + span * 0.25, kind.low + span * 0.5)
    if isinstance(kind, Count):
        return (kind.minimum + 3, kind.minimum + 4)
    if isinstance(kind, AbsolutePath | Directory):
        return ("/first/place", "/second/place")
    if isinstance(kind, ListenAddress):
        return ("127.0.0.1:9500", "[::]:9600")
    if isinstance(kind, OtlpEndpoint):
        return ("http://first:4317", "https://second:4318")
    if isinstance(kind, StringMap):
        return ({"a": "1"}, {"b": "2"})
    if isinstance(kind, SizeMap):
        return ({"example.com/mem": 1024}, {"example.com/other": 2048})
    if isinstance(kind, Text):
        return ("first", "second")
    raise AssertionError(f"no sample values for {row.key} ({kind})")


def env_text(env: Env, value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value / env.scale)
    return str(value)


def file_for(tmp_path: Path, key: str, value: Any) -> Path:
    tree: dict[str, Any] = {}
    *sections, leaf = key.split(".")
    node = tree
    for part in sections:
        node = node.setdefault(part, {})
    node[leaf] = value
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    return path


def effective(config: AgentConfig, key: str) -> Any:
    return flatten(config)[key]


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.key)
def test_every_key_layers_flags_over_agent_env_over_generic_env_over_file_over_default(
    row: Key, tmp_path: Path,
) -> None:
    key = dotted(row)
    a, b = two_values(row)
    if ANY_GROUP not in row.key:
        assert effective(load(None, environ={}), key) == row.kind.check(row.default)
    path = file_for(tmp_path, key, a)
    assert effective(load(path, environ={}), key) == a  # file over default
    top, env, overrides = a, {}, Overrides()
    # Each layer present sets the value the layer below did not, so winning is visible.
    for layer_env in (row.generic_env, row.env):
        if layer_env is not None:
            top = b if top == a else a
            env[layer_env.name] = env_text(layer_env, top)
            got = effective(load(path, environ=env), key)
            assert got == (pytest.approx(top) if isinstance(top, float) else top), layer_env
    if row.override is not None:
        top = b if top == a else a
        overrides = Overrides(**{row.override: top})
        assert effective(load(path, overrides, environ=env), key) == top


def test_node_name_from_the_agent_variable_beats_the_kubernetes_one() -> None:
    env = {"GPU_AGENT_NODE_NAME": "a", "K8S_NODE_NAME": "b"}
    assert load(None, environ=env).node_name == "a"
    assert load(None, environ={"K8S_NODE_NAME": "b"}).node_name == "b"


def test_the_dataclass_defaults_are_the_table_defaults() -> None:
    loaded = load(None, environ={})
    assert loaded == AgentConfig()
    keys = {dotted(row) for row in TABLE if ANY_GROUP not in row.key}
    assert set(flatten(loaded)) == keys  # every field has a row and every row a field
    for row in TABLE:
        if ANY_GROUP not in row.key:
            assert flatten(loaded)[row.key] == row.kind.check(row.default), row.key


def test_a_plugin_group_takes_the_wildcard_defaults(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(f"groups: {{{PLUGIN_GROUP}: {{interval: 2}}}}\n", encoding="utf-8")
    group = load(path, environ={}).groups[PLUGIN_GROUP]
    assert (group.enabled, group.interval) == (True, 2.0)
    assert list(to_tree(load(path, environ={}))["groups"])[-1] == PLUGIN_GROUP


def test_every_row_has_a_description_and_a_row_without_one_is_refused() -> None:
    assert all(row.description.strip() for row in TABLE)
    with pytest.raises(ValueError, match="no description"):
        Key("x", Flag(), True, Reload.LIVE, " ")


def test_rows_are_checked_when_the_table_is_built() -> None:
    with pytest.raises(ValueError, match=r"x: default -1"):
        Key("x", Seconds(), -1, Reload.LIVE, "d")
    with pytest.raises(ValueError, match="must start with GPU_AGENT_"):
        Key("x", Flag(), True, Reload.LIVE, "d", env=Env("K8S_X"))
    with pytest.raises(ValueError, match="agent's own variable"):
        Key("x", Flag(), True, Reload.LIVE, "d", generic_env=Env("GPU_AGENT_X"))


def test_every_flag_of_the_table_is_a_command_line_override() -> None:
    from gpu_otel_agent.cli import build_parser

    flags = {row.flag for row in TABLE if row.flag}
    assert {row.override for row in TABLE if row.flag} == set(Overrides.__dataclass_fields__)
    run = build_parser().parse_args(["run"])
    assert {f"--{name.replace('_', '-')}" for name in vars(run)} >= flags


def test_config_show_prints_the_agent_variable_over_the_generic_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpu_otel_agent.cli import main

    monkeypatch.setenv("GPU_AGENT_NODE_NAME", "a")
    monkeypatch.setenv("K8S_NODE_NAME", "b")
    assert main(["config", "show", "--interval", "3"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["node_name"] == "a"
    assert shown["groups"]["fast"]["interval"] == 3.0


def test_config_show_hides_header_values(tmp_path: Path) -> None:
    path = file_for(tmp_path, "otlp.headers", {"authorization": "Bearer s3cret"})
    tree = to_tree(load(path, environ={}))
    assert tree["otlp"]["headers"] == {"authorization": "<redacted>"}
    assert "s3cret" not in yaml.safe_dump(tree)


def test_reload_names_exactly_the_changed_keys_that_need_a_restart(tmp_path: Path) -> None:
    old = load(None, environ={})
    path = tmp_path / "agent.yaml"
    path.write_text("export_interval: 3\nnode_name: n1\notlp: {endpoint: 'http://c:4317'}\n"
                    "prometheus: {scheme: dcgm}\ngroups: {extra: {interval: 1}}\n",
                    encoding="utf-8")
    new = load(path, environ={})
    assert restart_needed(old, new) == ["node_name", "otlp.endpoint"]
    assert restart_needed(new, new) == []


# -- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("exporterr: otlp", r"^exporterr in .*agent\.yaml: unknown key \(known: .*exporter"),
    ("otlp: {endpointt: x}", r"^otlp\.endpointt in .*: unknown key \(known: certificate, "),
    ("groups: {fast: {intervall: 1}}",
     r"^groups\.fast\.intervall in .*: unknown key \(known: enabled, interval\)"),
    ("groups: {extra: {every: 1}}", r"^groups\.extra\.every in .*: unknown key"),
    ("groups: {'*': {interval: 1}}", r"^groups\.\* in .*: unknown key"),
    ("health: 5", r"^health in .*: expected a mapping"),
    ("[1, 2]", r"^top level in .*: expected a mapping"),
    ("export_interval: soon", r"^export_interval in .*agent\.yaml: expected a number, "
                              r"got 'soon'"),
    ("export_interval: true", r"^export_interval in .*: expected a number, got True"),
    ("call_timeout: 0", r"^call_timeout in .*: must be a positive number of seconds, got 0"),
    ("call_timeout: .inf", r"^call_timeout in .*: must be a positive number of seconds"),
    ("tracing: {sample_ratio: 1.5}", r"^tracing\.sample_ratio in .*: must be between 0 and 1, "
                                     r"got 1\.5"),
    ("ebpf: {max_allocations: 0}", r"^ebpf\.max_allocations in .*: .*at least 1, got 0"),
    ("log_level: loud", r"^log_level in .*: must be one of debug, info, warning, error, "
                        r"got 'loud'"),
    ("node_name: ''", r"^node_name in .*: expected a non-empty string, got ''"),
    ("otlp: {headers: {a: 1}}", r"^otlp\.headers in .*: expected a mapping of strings"),
    ("prometheus: {listen: ':http'}", r"^prometheus\.listen in .*: expected host:port"),
    ("groups: {fast: {enabled: 'on'}}",
     r"^groups\.fast\.enabled in .*: expected true or false, got 'on'"),
])
def test_bad_file_values_name_key_file_and_value(
    tmp_path: Path, text: str, message: str,
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load(path, environ={})


@pytest.mark.parametrize(("env", "message"), [
    ({"GPU_AGENT_INTERVAL": "fast"},
     r"^groups\.fast\.interval in environment variable GPU_AGENT_INTERVAL: expected a number, "
     r"got 'fast'"),
    ({"OTEL_METRIC_EXPORT_INTERVAL": "-5"},
     r"^export_interval in environment variable OTEL_METRIC_EXPORT_INTERVAL: must be a "
     r"positive number"),
    ({"GPU_AGENT_EBPF_ENABLED": "maybe"},
     r"^ebpf\.enabled in environment variable GPU_AGENT_EBPF_ENABLED: expected true or false, "
     r"got 'maybe'"),
    ({"GPU_AGENT_PROMETHEUS_SCHEME": "prom"},
     r"^prometheus\.scheme in environment variable GPU_AGENT_PROMETHEUS_SCHEME: must be one of"),
    ({"GPU_AGENT_KUBELET_SOCKET": "kubelet.sock"},
     r"^attribution\.kubelet\.socket in environment variable GPU_AGENT_KUBELET_SOCKET: "
     r"expected an absolute path or null, got 'kubelet\.sock'"),
    ({"K8S_NODE_NAME": ""}, r"^node_name in environment variable K8S_NODE_NAME: expected a "
                            r"non-empty string"),
])
def test_bad_environment_values_name_key_variable_and_value(
    env: dict[str, str], message: str,
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(None, environ=env)


def test_environment_words_for_booleans_but_not_in_the_file(tmp_path: Path) -> None:
    for word, expected in (("1", True), ("YES", True), ("no", False), ("false", False)):
        assert load(None, environ={"GPU_AGENT_TRACING_ENABLED": word}).tracing.enabled \
            is expected
    path = file_for(tmp_path, "tracing.enabled", "yes")
    with pytest.raises(ConfigError, match=r"tracing\.enabled in .*agent\.yaml"):
        load(path, environ={})


def test_a_bad_flag_value_names_the_command_line() -> None:
    with pytest.raises(ConfigError, match=r"^export_interval in command line: must be a "
                                          r"positive number of seconds, got -1"):
        load(None, Overrides(export_interval=-1), environ={})


def test_kinds_reject_what_they_do_not_hold() -> None:
    with pytest.raises(Invalid):
        Count().check(2.5)
    with pytest.raises(Invalid):
        SizeMap().check({"x/y": True})
    assert SizeMap().check(None) == {}
    assert Choice(choices=("info",), fold_case=True).check("INFO") == "info"


@pytest.mark.parametrize(("flag", "bad", "message"), [
    ("--interval", "0", "must be a positive number of seconds, got 0.0"),
    ("--export-interval", "soon", "expected a number, got 'soon'"),
    ("--exporter", "kafka", "must be one of otlp, console, none, got 'kafka'"),
])
def test_the_parser_rejects_a_bad_flag_value_with_the_kinds_reason(
    flag: str, bad: str, message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """The parser's flags are built from the table rows, so they check what the key checks."""
    from gpu_otel_agent.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["config", "show", flag, bad])
    assert exited.value.code == 2
    assert f"argument {flag}: {message}" in capsys.readouterr().err


def test_a_flag_value_is_parsed_as_the_keys_environment_variable_would_be(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpu_otel_agent.cli import main

    assert main(["config", "show", "--log-level", "WARNING", "--interval", "2.5"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["log_level"] == "warning"
    assert shown["groups"]["fast"]["interval"] == 2.5
