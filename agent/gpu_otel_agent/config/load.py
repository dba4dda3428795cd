"""Layered configuration, driven by the table: defaults < file < generic environment variables
(``K8S_NODE_NAME``, ``OTEL_*``) < the agent's own ``GPU_AGENT_*`` variables < flags.

Every value remembers where it came from, so a validation error can say "groups.fast.interval
in /etc/gpu-agent.yaml: must be a positive number of seconds, got -1" instead of failing
somewhere later.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from gpu_otel_agent.config.file_text import FileRefused, read_text
from gpu_otel_agent.config.kinds import Invalid, StringMap
from gpu_otel_agent.config.safe_yaml import load_yaml
from gpu_otel_agent.config.schema import AgentConfig, GroupConfig
from gpu_otel_agent.config.table import (
    ANY_GROUP,
    BY_KEY,
    GROUPS,
    TABLE,
    Env,
    Key,
    Reload,
    children,
    lookup,
    pattern,
)

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the key, its origin and the problem."""


@dataclass(frozen=True)
class Overrides:
    """Values given on the command line; None means "not given". Fields are named after the
    table's flags (``--export-interval`` fills ``export_interval``)."""

    interval: float | None = None
    export_interval: float | None = None
    exporter: str | None = None
    console_format: str | None = None
    log_level: str | None = None


DEFAULTS_ORIGIN = "defaults"


class _Layers:
    """Raw values by dotted key, each with the origin of the layer that set it last."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.origin: dict[str, str] = {}

    def set(self, dotted: str, value: Any, origin: str) -> None:
        self.values[dotted] = value
        self.origin[dotted] = origin

    def where(self, dotted: str) -> str:
        return self.origin.get(dotted, DEFAULTS_ORIGIN)


def _walk_file(data: Any, section: str, layers: _Layers, origin: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{section or 'top level'} in {origin}: expected a mapping")
    for name, value in data.items():
        dotted = f"{section}.{name}" if section else str(name)
        placeholder = name == ANY_GROUP  # the table's stand-in for plugin groups, not a name
        if section == "groups" and not placeholder:
            _check_group_name(str(name), origin)
        if not placeholder and lookup(dotted) is not None:
            layers.set(dotted, value, origin)
        elif not placeholder and children(dotted):
            _walk_file(value, dotted, layers, origin)
        else:
            known = ", ".join(sorted(children(section)))
            raise ConfigError(f"{dotted} in {origin}: unknown key (known: {known})")


def _check_group_name(name: str, origin: str) -> None:
    """A name under ``groups`` that is not the core's is a plugin's group, or a typo: one
    close to a core group is refused (``fastt``), any other is named once in the log."""
    if name in GROUPS:
        return
    import difflib  # only for a name that is not a core group: 0.2 MiB the agent rarely needs

    close = difflib.get_close_matches(name, GROUPS, n=1, cutoff=0.75)
    core = ", ".join(GROUPS)
    if close:
        raise ConfigError(f"groups.{name} in {origin}: unknown group; did you mean "
                          f"{close[0]!r}? (the core's groups: {core})")
    log.warning("groups.%s in %s: not one of the core's groups (%s); it applies only to a "
                "plugin that reads a group of that name", name, origin, core)


def read_file(path: Path, layers: _Layers) -> None:
    origin = str(path)
    try:
        text = read_text(path)
    except FileRefused as exc:
        raise ConfigError(str(exc)) from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error(path, exc)) from exc
    if data is None:
        return
    _walk_file(data, "", layers, origin)


def yaml_error(path: Path, error: yaml.YAMLError) -> str:
    """``FILE:LINE:COLUMN: not valid YAML: problem``: PyYAML's own text names the string it
    parsed (``"<unicode string>"``), not the file."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    return f"{where}: not valid YAML: {problem}" + (f" ({context})" if context else "")


def _set_from_env(layers: _Layers, row: Key, env: Env, environ: Mapping[str, str]) -> None:
    if env.name not in environ:
        return
    origin = f"environment variable {env.name}"
    try:
        value = row.kind.from_env(environ[env.name])
    except Invalid as error:
        raise ConfigError(f"{row.key} in {origin}: {error}") from None
    if env.scale != 1.0 and isinstance(value, float):
        value *= env.scale
    layers.set(row.key, value, origin)


def load(
    path: Path | None,
    overrides: Overrides = Overrides(),
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    env = os.environ if environ is None else environ
    layers = _Layers()
    if path is not None:
        read_file(path, layers)
    # Lowest first, so a later layer wins: generic variables, the agent's own, then flags.
    for row in TABLE:
        if row.generic_env is not None:
            _set_from_env(layers, row, row.generic_env, env)
    for row in TABLE:
        if row.env is not None:
            _set_from_env(layers, row, row.env, env)
    for row in TABLE:
        value = None if row.override is None else getattr(overrides, row.override)
        if value is not None:
            layers.set(row.key, value, "command line")
    return _build(_validated(layers))


def _group_names(keys: Iterator[str]) -> list[str]:
    """The core's groups, then those a plugin's configuration names, in file order."""
    names = list(GROUPS)
    for dotted in keys:
        parts = dotted.split(".")
        if parts[0] == "groups" and parts[1] not in names:
            names.append(parts[1])
    return names


def _validated(layers: _Layers) -> dict[str, Any]:
    """Every key's checked value: set ones from their layer, the rest from the table."""
    values: dict[str, Any] = {}
    keys = [row.key for row in TABLE if not row.key.startswith("groups.")]
    for group in _group_names(iter(layers.values)):
        keys.extend(f"groups.{group}.{name}" for name in children(f"groups.{group}"))
    for dotted in keys:
        row = BY_KEY[pattern(dotted)]
        raw = layers.values.get(dotted, row.default)
        try:
            values[dotted] = row.kind.check(raw)
        except Invalid as error:
            raise ConfigError(f"{dotted} in {layers.where(dotted)}: {error}") from None
    return values


def _build(values: Mapping[str, Any]) -> AgentConfig:
    groups = {
        name: GroupConfig(values[f"groups.{name}.enabled"], values[f"groups.{name}.interval"])
        for name in dict.fromkeys(k.split(".")[1] for k in values if k.startswith("groups."))
    }
    return _instance(AgentConfig, "", {**values, "groups": MappingProxyType(groups)})


_T = typing.TypeVar("_T")


def _instance(cls: type[_T], section: str, values: Mapping[str, Any]) -> _T:
    """``cls`` with each field from the dotted key of the same path (nested classes recursed)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        dotted = f"{section}.{item.name}" if section else item.name
        hint = hints[item.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[item.name] = _instance(hint, dotted, values)
        else:
            kwargs[item.name] = values[dotted]
    return cls(**kwargs)


def flatten(config: AgentConfig) -> dict[str, Any]:
    """Every key of a configuration, dotted, in table order (the groups where the table has
    them, each group's keys together)."""
    found: dict[str, Any] = {}
    for row in TABLE:
        if row.key.startswith("groups."):
            if "groups" not in found:
                found["groups"] = None  # placeholder: keeps the table's order
                for name, group in config.groups.items():
                    found[f"groups.{name}.enabled"] = group.enabled
                    found[f"groups.{name}.interval"] = group.interval
            continue
        node: Any = config
        for part in row.key.split("."):
            node = getattr(node, part)
        found[row.key] = dict(node) if isinstance(node, Mapping) else node
    found.pop("groups", None)
    return found


def restart_needed(old: AgentConfig, new: AgentConfig) -> list[str]:
    """Keys that changed between two configurations but are only read at start-up."""
    before, after = flatten(old), flatten(new)
    return [dotted for dotted in after
            if before.get(dotted) != after[dotted]
            and BY_KEY[pattern(dotted)].reload is Reload.RESTART]


REDACTED = "<redacted>"
_SECRET_MAPS = frozenset({"otlp.headers"})  # values are credentials; show names only


def exporter_overrides(environ: Mapping[str, str]) -> dict[str, tuple[str, Any]]:
    """Keys whose value the standard ``OTEL_EXPORTER_OTLP_*`` variable sets over the file:
    dotted key -> (variable, value as the file would hold it)."""
    found: dict[str, tuple[str, Any]] = {}
    for row in TABLE:
        text = environ.get(row.exporter_env or "", "").strip()
        if not row.exporter_env or not text:
            continue
        value: Any
        if isinstance(row.kind, StringMap):  # headers: k=v,k2=v2; only the names are shown
            value = {pair.split("=", 1)[0].strip(): "" for pair in text.split(",") if pair}
        else:
            try:
                value = row.kind.check(row.kind.from_env(text))
            except Invalid:
                value = text  # the exporter refuses it at start, naming the variable
        found[row.key] = (row.exporter_env, value)
    return found


def to_tree(config: AgentConfig, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The effective configuration as plain data, for ``gpu-agent config show``; with
    ``environ``, the exporter's own variables win over the file as they do in the agent."""
    tree: dict[str, Any] = {}
    effective_values = flatten(config)
    for dotted, (_, value) in exporter_overrides(environ or {}).items():
        effective_values[dotted] = value
    for dotted, effective in effective_values.items():
        value = {name: REDACTED for name in effective} if dotted in _SECRET_MAPS else effective
        *sections, leaf = dotted.split(".")
        node = tree
        for part in sections:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


__all__ = ["ANY_GROUP", "ConfigError", "Overrides", "exporter_overrides", "flatten", "load",
           "restart_needed", "to_tree", "yaml_error"]
