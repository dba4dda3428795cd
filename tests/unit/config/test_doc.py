"""docs/config.md is generated from the table, and what it says is checked against the loaded
configuration and the agent's behaviour, not against the same text again."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.table import BY_KEY, pattern
from gpu_otel_agent.docs.config_doc import COLUMNS, config_markdown
from tests.unit.config.test_table import PLUGIN_GROUP, env_text, two_values

DOC = Path(__file__).resolve().parents[3] / "docs" / "config.md"
EXPORTER_MARK = " (read by the exporter)"


def doc_rows() -> dict[str, dict[str, str]]:
    """The markdown table of docs/config.md, by key, cells by column name."""
    rows: dict[str, dict[str, str]] = {}
    header: list[str] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= {"-", " "}:
            continue
        row = dict(zip(header, cells, strict=True))
        rows[row["key"].strip("`")] = row
    assert header == list(COLUMNS)
    return rows


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every field of a loaded configuration, walked through its dataclasses (not the table)."""
    if dataclasses.is_dataclass(value):
        found: dict[str, Any] = {}
        for item in dataclasses.fields(value):
            found.update(leaves(getattr(value, item.name), f"{prefix}{item.name}."))
        return found
    if prefix == "groups.":
        found = {}
        for name, group in value.items():
            found.update(leaves(group, f"groups.{name}."))
        return found
    return {prefix.rstrip("."): dict(value) if isinstance(value, Mapping) else value}


def cell_value(cell: str) -> Any:
    return yaml.safe_load(cell.strip("`"))


def test_the_doc_is_the_generated_one() -> None:
    assert DOC.read_text(encoding="utf-8") == config_markdown(), (
        "docs/config.md is stale: run gpu-agent docs config --output docs/config.md")


def test_every_key_of_a_loaded_configuration_has_a_line_with_a_description(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(f"groups: {{{PLUGIN_GROUP}: {{interval: 2}}}}\n", encoding="utf-8")
    loaded = leaves(load(path, environ={}))
    defaults = leaves(load(None, environ={}))
    rows = doc_rows()
    assert len(loaded) > 40
    for key, value in loaded.items():
        row = rows.get(pattern(key))
        assert row is not None, f"{key} is not in docs/config.md"
        assert row["description"] not in ("", "—"), f"{key} has no description"
        if key in defaults:
            assert cell_value(row["default"]) == defaults[key], key
        else:  # the plugin group: the wildcard row's default unless the file set it
            assert key.endswith(".interval") or cell_value(row["default"]) == value
    assert set(rows) == {pattern(k) for k in loaded}  # and nothing the agent does not have


def variables(cell: str) -> list[tuple[str, str]]:
    return re.findall(r"`([A-Z0-9_]+)`( \(ms\))?", cell)


def test_each_documented_variable_sets_its_key() -> None:
    checked = 0
    for key, row in doc_rows().items():
        for column in ("agent variable", "generic variable"):
            if row[column] == "—" or row[column].endswith(EXPORTER_MARK):
                continue
            ((name, unit),) = variables(row[column])
            table_row = BY_KEY[key]
            env = next(e for e in (table_row.env, table_row.generic_env)
                       if e is not None and e.name == name)
            value, _ = two_values(table_row)
            assert (unit == " (ms)") == (env.scale == 0.001)
            loaded = load(None, environ={name: env_text(env, value)})
            node: Any = loaded
            for part in key.split("."):
                node = node[part] if isinstance(node, Mapping) else getattr(node, part)
            assert node == (pytest.approx(value) if isinstance(value, float) else value), name
            checked += 1
    assert checked >= 14


def test_each_documented_flag_sets_its_key(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_otel_agent.cli import main

    flagged = {key: row for key, row in doc_rows().items() if row["flag"] != "—"}
    assert len(flagged) == 5
    for key, row in flagged.items():
        value, _ = two_values(BY_KEY[key])
        assert main(["config", "show", row["flag"].strip("`"), str(value)]) == 0
        node: Any = yaml.safe_load(capsys.readouterr().out)
        for part in key.split("."):
            node = node[part]
        assert node == value, key


EXPORTER_KWARGS = {  # key -> the exporter argument the file's value becomes (http/protobuf)
    "otlp.endpoint": ("http://file:4318", "endpoint"),
    "otlp.headers": ({"a": "b"}, "headers"),
    "otlp.timeout": (3.0, "timeout"),
    "otlp.compression": ("gzip", "compression"),
    "otlp.certificate": ("/etc/ca.pem", "certificate_file"),
}


def test_documented_exporter_variables_win_over_the_file(tmp_path: Path) -> None:
    from gpu_otel_agent.export.metrics.exporters import otlp_settings

    rows = {k: r for k, r in doc_rows().items() if r["generic variable"].endswith(EXPORTER_MARK)}
    assert set(rows) == {*EXPORTER_KWARGS, "otlp.protocol", "otlp.insecure"}
    for key, row in rows.items():
        ((name, _),) = variables(row["generic variable"])
        leaf = key.split(".")[1]
        if key == "otlp.protocol":
            tree = {"otlp": {"protocol": "grpc"}}
        elif key == "otlp.insecure":  # a gRPC setting
            tree = {"otlp": {"protocol": "grpc", "insecure": True}}
        else:
            tree = {"otlp": {"protocol": "http/protobuf", leaf: EXPORTER_KWARGS[key][0]}}
        path = tmp_path / "agent.yaml"
        path.write_text(yaml.safe_dump(tree), encoding="utf-8")
        config = load(path, environ={})
        argument = {"otlp.protocol": None, "otlp.insecure": "insecure"}.get(
            key, EXPORTER_KWARGS.get(key, (None, None))[1])
        protocol, kwargs = otlp_settings(config, {})
        if argument is not None:
            assert argument in kwargs, key  # the file's value is used ...
        value = "http/protobuf" if key == "otlp.protocol" else "x"
        protocol_env, kwargs_env = otlp_settings(config, {name: value})
        if argument is not None:
            assert argument not in kwargs_env, key  # ... until the variable is set
        else:
            assert (protocol, protocol_env) == ("grpc", "http/protobuf")
