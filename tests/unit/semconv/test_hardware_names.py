"""Every ``hw.*`` name of the catalog, as the series builder attaches its attributes, against
the semantic conventions' model files vendored at the release the agent targets
(``tests/semconv/v1.44.0``): instrument, unit, attribute names, types and enum values. The
integration test ``test_docs_names.py`` does the same on what a running agent sends."""

from __future__ import annotations

import pytest

from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.model.metrics import DEVICE_METRICS, MetricSpec
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)
from tests.semconv.model import divergences, load

MODEL = load()
HW = [spec for spec in DEVICE_METRICS if spec.name.startswith("hw.")]
GPU = DeviceIdentity("GPU-0", 0, "nvidia", "NVIDIA H100 80GB HBM3", "00000000:1A:00.0",
                     driver_version="580.95.05", serial_number="1650923000001",
                     firmware_version="96.00.99.00.01")
MIG = DeviceIdentity("MIG-1", 0, "nvidia", GPU.model, GPU.pci_bus_id,
                     DevicePartition("GPU-0", "mig", "3g.40gb", (("gpu.mig.profile", "3g.40gb"),)),
                     driver_version="580.95.05")
# One value of each attribute the agent's readings carry, as the readers set them.
VALUES: dict[str, tuple[str, ...]] = {
    "hw.gpu.task": ("general", "encoder", "decoder"),
    "network.io.direction": ("transmit", "receive"),
    "hw.sensor_location": ("gpu", "memory", "edge"),
    "error.type": ("corrected", "uncorrected"),
    "hw.limit_type": ("high.degraded",),
    "hw.state": ("ok", "degraded", "failed"),
}


def _readings(spec: MetricSpec) -> tuple[Reading, ...]:
    (key,) = spec.attributes or ("",)
    if not key:
        return (Reading(spec.name, 1),)
    return tuple(Reading(spec.name, 1, ((key, value),)) for value in VALUES[key])


def _points(identity: DeviceIdentity, spec: MetricSpec) -> list[dict[str, object]]:
    device = DeviceSnapshot(identity, HealthState.OK, 0).with_sample(
        GroupSample("fast", _readings(spec), 1))
    return [dict(p.attributes) for p in series(NodeSnapshot((device,), 1)).get(spec.name, ())]


def test_the_catalog_has_hw_names_to_check() -> None:
    assert {"hw.gpu.utilization", "hw.gpu.memory.utilization", "hw.errors", "hw.status",
            "hw.fan.speed_ratio", "hw.temperature"} <= {s.name for s in HW}


@pytest.mark.parametrize("spec", HW, ids=lambda s: s.name)
@pytest.mark.parametrize("identity", [GPU, MIG], ids=["gpu", "mig-instance"])
def test_each_hw_metric_as_the_conventions_define_it(spec: MetricSpec,
                                                     identity: DeviceIdentity) -> None:
    points = _points(identity, spec)
    assert points, spec.name
    for attributes in points:
        assert divergences(MODEL, spec.name, spec.instrument.value, spec.unit,
                           attributes) == []


@pytest.mark.parametrize(("metric", "instrument", "unit", "attributes", "finds"), [
    ("hw.gpu.memory.utilization", "gauge", "1", {"hw.id": "x", "hw.vendor": "AMD"}, []),
    # hw.gpu.* list no hw.type (only the GPU refinements of hw.errors/hw.status do).
    ("hw.gpu.memory.utilization", "gauge", "1", {"hw.id": "x", "hw.type": "gpu"},
     ["hw.type is not an attribute of this metric"]),
    ("hw.gpu.memory.usage", "gauge", "By", {"hw.id": "x"}, ["instrument gauge"]),
    ("hw.power", "gauge", "mW", {"hw.id": "x", "hw.type": "gpu"}, ["unit 'mW'"]),
    ("hw.gpu.fan", "gauge", "1", {"hw.id": "x"}, ["not a metric"]),
    ("hw.errors", "counter", "{error}", {"hw.id": "x", "hw.type": "gpu",
                                         "error.type": "deferred"}, ["'deferred' is not one"]),
    ("hw.gpu.utilization", "gauge", "1", {"hw.id": "x", "hw.gpu.task": "vcn"},
     ["'vcn' is not one"]),
    ("hw.power", "gauge", "W", {"hw.id": "x"}, ["required attribute hw.type"]),
    ("hw.temperature", "gauge", "Cel", {"hw.id": "x", "hw.vendor": "NVIDIA"},
     ["hw.vendor is not an attribute of this metric"]),
    ("hw.gpu.io", "counter", "By", {"hw.id": "x", "network.io.direction": "transmit",
                                    "hw.bus": "pcie"}, ["hw.bus is not an attribute"]),
    ("hw.status", "updowncounter", "1", {"hw.id": "x", "hw.type": "gpu", "hw.state": "ok",
                                         "gpu.index": 3}, []),
    ("hw.gpu.memory.limit", "updowncounter", "By", {"hw.id": 5}, ["not a string"]),
])
def test_the_comparison_finds_each_kind_of_divergence(
        metric: str, instrument: str, unit: str, attributes: dict[str, object],
        finds: list[str]) -> None:
    found = divergences(MODEL, metric, instrument, unit, attributes)
    assert len(found) == len(finds), found
    for text, expected in zip(found, finds, strict=True):
        assert expected in text
