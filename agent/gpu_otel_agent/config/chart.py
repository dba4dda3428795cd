"""The chart's values that set agent configuration keys, and their part of values.schema.json.

The chart (helm/gpu-otel-agent) writes the agent's ``agent.yaml`` from a few camelCase values
(``templates/_helpers.tpl``, ``gpu-otel-agent.config``). For each of them :data:`CHART_VALUES`
names the key it sets; the schema's constraints and description for that value come from the
key's row in the table, and its default is the key's default unless the chart deliberately
chooses another (then ``why`` says why). ``gpu-agent docs chart-schema`` rewrites those
properties of values.schema.json; a test fails when the committed file differs, and another
renders the chart to check that each value really lands on its key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.config.table import BY_KEY

_FROM_TABLE = object()


def _port(listen: str) -> int:
    return int(listen.rpartition(":")[2])


def _listen(port: Any) -> str:
    return f"0.0.0.0:{port}"  # what the chart's template writes


@dataclass(frozen=True)
class ChartValue:
    path: str  # dotted path in values.yaml
    key: str  # the agent configuration key it sets
    chart_default: Any = _FROM_TABLE  # the chart's own default, where it differs on purpose
    why: str = ""  # why the chart's default differs from the agent's
    # Where the value is not the key's value itself: key value -> chart value and back.
    from_key: Callable[[Any], Any] | None = None
    to_key: Callable[[Any], Any] | None = None
    schema: dict[str, Any] | None = None  # constraints, where the key's kind does not fit

    @property
    def default(self) -> Any:
        if self.chart_default is not _FROM_TABLE:
            return self.chart_default
        value = BY_KEY[self.key].default
        return value if self.from_key is None else self.from_key(value)

    def agent_value(self, chart_value: Any) -> Any:
        """The key's value in agent.yaml for this chart value."""
        return chart_value if self.to_key is None else self.to_key(chart_value)

    def property(self) -> dict[str, Any]:
        row = BY_KEY[self.key]
        constraints = self.schema if self.schema is not None else row.kind.json_schema()
        description = f"agent key {self.key}: {row.description}"
        if self.why:
            description += f" Chart default differs from the agent's: {self.why}"
        return {**constraints, "default": self.default, "description": description}


CHART_VALUES: tuple[ChartValue, ...] = (
    ChartValue("exportInterval", "export_interval"),
    ChartValue("logLevel", "log_level"),
    ChartValue("otlp.protocol", "otlp.protocol", "grpc",
               why="the schema needs a value; grpc is what the agent uses for null."),
    ChartValue("otlp.insecure", "otlp.insecure", False,
               why="a chart value is true or false; false keeps TLS on for https endpoints."),
    ChartValue("otlp.compression", "otlp.compression", "gzip",
               why="node to gateway traffic is compressed by default."),
    ChartValue("prometheus.enabled", "prometheus.enabled", True,
               why="the chart's liveness and readiness probes use the endpoint."),
    ChartValue("prometheus.port", "prometheus.listen", from_key=_port, to_key=_listen,
               schema={"type": "integer", "minimum": 1, "maximum": 65535}),
    ChartValue("prometheus.scheme", "prometheus.scheme"),
    ChartValue("prometheus.dcgmExporterVersion", "prometheus.dcgm_exporter_version"),
    ChartValue("attribution.enabled", "attribution.enabled"),
    ChartValue("health.kernelLog", "health.kmsg", False,
               why="reading /dev/kmsg needs CAP_SYSLOG; the chart adds it only when asked."),
    ChartValue("health.spool.maxMiB", "health.spool_max_mib"),
    ChartValue("tracing.enabled", "tracing.enabled"),
    ChartValue("localEndpoint.enabled", "local_endpoint.enabled"),
    ChartValue("ebpf.enabled", "ebpf.enabled"),
    ChartValue("ebpf.processEvents", "attribution.process_events"),
)


def _property_node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The ``properties`` mapping that holds the last part of ``path``."""
    node = schema
    for part in path.split(".")[:-1]:
        try:
            node = node["properties"][part]
        except KeyError:
            raise ValueError(f"values.schema.json has no object {part!r} for {path}") from None
    properties: dict[str, Any] = node["properties"]
    return properties


def chart_schema(current: dict[str, Any]) -> dict[str, Any]:
    """``current`` (the parsed values.schema.json) with the mapped values' properties derived."""
    schema = copy.deepcopy(current)
    for value in CHART_VALUES:
        properties = _property_node(schema, value.path)
        name = value.path.rpartition(".")[2]
        if name not in properties:
            raise ValueError(f"values.schema.json has no property {value.path}")
        properties[name] = value.property()
    return schema


WIDTH = 100


def _dump(value: Any, indent: int, column: int) -> str:
    """JSON with a value on one line where it fits (``column``: where it starts), nested
    objects indented by two, as the hand-written file had it."""
    flat = json.dumps(value, separators=(", ", ": "))
    if not isinstance(value, dict) or not value or column + len(flat) <= WIDTH:
        return flat
    inner = " " * (indent + 2)
    items = []
    for key, item in value.items():
        prefix = f"{inner}{json.dumps(key)}: "
        items.append(prefix + _dump(item, indent + 2, len(prefix)))
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def chart_schema_text(current_text: str) -> str:
    return _dump(chart_schema(json.loads(current_text)), 0, 0) + "\n"
