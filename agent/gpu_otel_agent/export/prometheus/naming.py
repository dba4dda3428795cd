"""OpenTelemetry -> Prometheus names, as the OpenTelemetry specification translates them.

Metric names: characters outside ``[a-zA-Z0-9_:]`` become ``_``, the unit is appended as a
word (``By`` -> ``bytes``, ``Cel`` -> ``celsius``; a gauge of unit ``1`` gets ``ratio``;
annotations such as ``{error}`` add nothing) and monotonic counters end in ``_total``. So
``hw.gpu.memory.usage`` is ``hw_gpu_memory_usage_bytes`` and ``hw.energy`` is
``hw_energy_joules_total`` — the names Prometheus's own OTLP receiver gives the same data, so
queries work whether the agent is scraped or pushes through a collector into Prometheus.
"""

from __future__ import annotations

import re
from functools import lru_cache

from gpu_otel_agent.model.metrics import Instrument, MetricSpec

UNIT_WORDS = {
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "Cel": "celsius",
    "W": "watts",
    "J": "joules",
    "Hz": "hertz",
    "V": "volts",
    "A": "amperes",
    "%": "percent",
}
# The denominator of a per-unit ("By/s") is singular (OpenTelemetry's translator:
# ``bytes_per_second``).
PER_UNIT_WORDS = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week",
                  "mo": "month", "y": "year"}
_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]+")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]+")


def _collapse(text: str) -> str:
    return re.sub(r"__+", "_", text).strip("_")


def unit_suffix(spec: MetricSpec) -> str:
    unit = spec.unit
    if unit == "1":
        return "ratio" if spec.instrument is Instrument.GAUGE else ""
    if unit.startswith("{") and unit.endswith("}"):
        return ""
    if "/" in unit:
        numerator, _, denominator = unit.partition("/")
        words = [UNIT_WORDS.get(numerator, numerator), "per",
                 PER_UNIT_WORDS.get(denominator, UNIT_WORDS.get(denominator, denominator))]
        return "_".join(w for w in words if w)
    return UNIT_WORDS.get(unit, _collapse(_INVALID_NAME.sub("_", unit)))


@lru_cache(maxsize=1024)
def metric_name(spec: MetricSpec) -> str:
    name = _collapse(_INVALID_NAME.sub("_", spec.name))
    if name[:1].isdigit():
        name = "_" + name
    suffix = unit_suffix(spec)
    if suffix and not name.endswith(f"_{suffix}"):
        name = f"{name}_{suffix}"
    if spec.instrument is Instrument.COUNTER and not name.endswith("_total"):
        name = f"{name}_total"
    return name


def prometheus_type(spec: MetricSpec) -> str:
    # An up-down counter is a gauge to Prometheus: it may go down.
    return "counter" if spec.instrument is Instrument.COUNTER else "gauge"


@lru_cache(maxsize=4096)
def label_name(key: str) -> str:
    name = _INVALID_LABEL.sub("_", key)
    if name[:1].isdigit():
        name = "key_" + name
    return name
