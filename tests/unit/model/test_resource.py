"""``model.resource.create`` makes what the SDK's ``Resource.create`` makes (the reference):
the same attributes in the same order and the same schema URL, for the agent's own attributes
under fixed and random ``OTEL_RESOURCE_ATTRIBUTES`` / ``OTEL_SERVICE_NAME`` /
``OTEL_EXPERIMENTAL_RESOURCE_DETECTORS``; and which inputs take the plain path."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from gpu_otel_agent.export.otlp.scope import SCOPE, sdk_scope
from gpu_otel_agent.model.resource import (
    OTEL_EXPERIMENTAL_RESOURCE_DETECTORS,
    OTEL_RESOURCE_ATTRIBUTES,
    OTEL_SERVICE_NAME,
    PlainResource,
    ResourceView,
    create,
    sdk_resource,
)
from gpu_otel_agent.model.semconv import SCHEMA_URL, agent_resource, service_instance_id

VARIABLES = (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME, OTEL_EXPERIMENTAL_RESOURCE_DETECTORS)
AGENT = {"service.name": "gpu-otel-agent", "service.version": "1.2.3",
         "service.instance.id": service_instance_id("node-1"), "host.name": "node-1"}


def _items(resource: ResourceView) -> list[tuple[str, object]]:
    return list(resource.attributes.items())


def _same_as_sdk(attributes: Mapping[str, str], schema_url: str | None) -> ResourceView:
    made = create(attributes, schema_url)
    reference = Resource.create(dict(attributes), schema_url=schema_url)
    assert _items(made) == _items(reference)
    assert made.schema_url == reference.schema_url
    return made


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


PLAIN_ENVIRONMENTS = [
    {},
    {OTEL_SERVICE_NAME: "svc"},
    {OTEL_SERVICE_NAME: ""},
    {OTEL_RESOURCE_ATTRIBUTES: ""},
    {OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,k8s.cluster.name=c1"},
    {OTEL_RESOURCE_ATTRIBUTES: " a = b%20c , d=e=f ,g=%2C%3D"},
    {OTEL_RESOURCE_ATTRIBUTES: "a=1,a=2,b="},
    {OTEL_RESOURCE_ATTRIBUTES: "service.name=from-env,service.instance.id=x,host.name=h",
     OTEL_SERVICE_NAME: "named"},
    {OTEL_RESOURCE_ATTRIBUTES: "telemetry.sdk.language=go,telemetry.sdk.version=0"},
    {OTEL_RESOURCE_ATTRIBUTES: "k=caf%C3%A9,u=%E2%82%AC,bad=%zz"},
    {OTEL_EXPERIMENTAL_RESOURCE_DETECTORS: "otel"},
    {OTEL_EXPERIMENTAL_RESOURCE_DETECTORS: " service_instance , otel "},
    {OTEL_EXPERIMENTAL_RESOURCE_DETECTORS: "service_instance,otel,otel,"},
]

SDK_ENVIRONMENTS = [
    {OTEL_RESOURCE_ATTRIBUTES: "a=b,no-equals"},
    {OTEL_RESOURCE_ATTRIBUTES: "a=b,"},
    {OTEL_RESOURCE_ATTRIBUTES: " =value"},
    {OTEL_EXPERIMENTAL_RESOURCE_DETECTORS: "otel,service_instance"},
    {OTEL_EXPERIMENTAL_RESOURCE_DETECTORS: "host"},
    {OTEL_EXPERIMENTAL_RESOURCE_DETECTORS: "os,otel"},
]


@pytest.mark.parametrize("environment", PLAIN_ENVIRONMENTS)
@pytest.mark.parametrize("schema_url", [SCHEMA_URL, None, ""])
def test_plain_path_equals_the_sdk(monkeypatch: pytest.MonkeyPatch,
                                   environment: dict[str, str], schema_url: str | None) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    made = _same_as_sdk(AGENT, schema_url)
    assert isinstance(made, PlainResource)


@pytest.mark.parametrize("environment", SDK_ENVIRONMENTS)
def test_what_the_sdk_would_warn_about_or_detect_goes_to_the_sdk(
        monkeypatch: pytest.MonkeyPatch, environment: dict[str, str]) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    made = create(AGENT, SCHEMA_URL)
    assert isinstance(made, Resource)
    reference = Resource.create(dict(AGENT), schema_url=SCHEMA_URL)
    # Detectors may add attributes of this process; the agent's own and the order agree.
    assert [k for k, _ in _items(made)] == [k for k, _ in _items(reference)]
    assert {k: made.attributes[k] for k in AGENT} == AGENT


def test_a_caller_without_its_own_instance_id_or_name_gets_the_sdk() -> None:
    without_id = {k: v for k, v in AGENT.items() if k != "service.instance.id"}
    assert isinstance(create(without_id, SCHEMA_URL), Resource)
    assert isinstance(create({**AGENT, "service.name": ""}, SCHEMA_URL), Resource)
    assert isinstance(create({**AGENT, "": "x"}, SCHEMA_URL), Resource)


def test_the_sdk_logs_the_same_warnings_for_what_it_is_given(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(OTEL_RESOURCE_ATTRIBUTES, "a=b,broken")
    with caplog.at_level(logging.WARNING):
        create(AGENT, SCHEMA_URL)
    assert any("broken" in record.getMessage() for record in caplog.records)


def _random_text(rng: random.Random, alphabet: str) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))


@pytest.mark.parametrize("seed", range(3))
def test_random_environments_equal_the_sdk(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ab.=, %2C%3d\t_-é"
    plain = 0
    for _ in range(300):
        for name in VARIABLES:
            monkeypatch.delenv(name, raising=False)
        if rng.random() < 0.9:
            monkeypatch.setenv(OTEL_RESOURCE_ATTRIBUTES, ",".join(
                f"{_random_text(rng, alphabet)}={_random_text(rng, alphabet)}"
                for _ in range(rng.randrange(0, 4))))
        if rng.random() < 0.5:
            monkeypatch.setenv(OTEL_SERVICE_NAME, _random_text(rng, "ab "))
        if rng.random() < 0.2:
            monkeypatch.setenv(OTEL_EXPERIMENTAL_RESOURCE_DETECTORS,
                               rng.choice(["otel", "service_instance", " otel ,", ""]))
        attributes = {**AGENT, "k8s.node.name": _random_text(rng, "xyz-")}
        made = create(attributes, SCHEMA_URL)
        if isinstance(made, PlainResource):
            plain += 1
            _same_as_sdk(attributes, SCHEMA_URL)
    assert plain > 100  # the plain path was exercised, not only the SDK's


def test_agent_resource_is_the_plain_one_by_default() -> None:
    resource = agent_resource("gpu-node-7")
    assert isinstance(resource, PlainResource)
    with pytest.raises(TypeError):
        resource.attributes["host.name"] = "other"  # type: ignore[index]


def test_sdk_resource_and_scope_carry_the_same_values() -> None:
    resource = agent_resource("gpu-node-7")
    converted = sdk_resource(resource)
    assert isinstance(converted, Resource)
    assert _items(converted) == _items(resource)
    assert converted.schema_url == resource.schema_url
    assert sdk_resource(converted) is converted
    assert sdk_scope() == InstrumentationScope("gpu_otel_agent", SCOPE.version,
                                               schema_url=SCHEMA_URL)
