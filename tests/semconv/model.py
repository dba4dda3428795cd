"""The vendored semantic-conventions model (``tests/semconv/v1.44.0``) as facts a test can
compare: each ``hw.*`` metric's instrument, unit and attributes (with their requirement
levels), the GPU refinements of shared metrics, and each attribute's type and enum members.

Only what the comparison needs is read: ``definition/2`` metric files (``metrics``,
``metric_refinements``, ``attribute_groups``) and the registries' ``groups[].attributes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpu_otel_agent.model.semconv import SEMCONV_VERSION

ROOT = Path(__file__).resolve().parent / f"v{SEMCONV_VERSION}" / "model"


@dataclass(frozen=True)
class AttributeRef:
    name: str
    requirement: str  # "required", "recommended", "conditionally_required", "opt_in"
    examples: tuple[str, ...] = ()  # the values a metric's note allows (refinements)


@dataclass(frozen=True)
class MetricDef:
    name: str
    instrument: str  # "gauge", "counter", "updowncounter", "histogram"
    unit: str
    attributes: dict[str, AttributeRef] = field(default_factory=dict)


@dataclass(frozen=True)
class AttributeDef:
    name: str
    type: str  # "string", "int", "double", "boolean", "enum", ...
    members: tuple[str, ...] = ()  # enum values


@dataclass(frozen=True)
class Model:
    metrics: dict[str, MetricDef]
    # (metric, hw.type value) -> the refinement of a shared metric for that component type
    refinements: dict[tuple[str, str], MetricDef]
    attributes: dict[str, AttributeDef]


def _requirement(raw: Any) -> str:
    if isinstance(raw, dict):
        return next(iter(raw))
    return str(raw or "recommended")


def _refs(items: list[dict[str, Any]], groups: dict[str, list[dict[str, Any]]]
          ) -> dict[str, AttributeRef]:
    out: dict[str, AttributeRef] = {}
    for item in items:
        if "ref_group" in item:
            out.update(_refs(groups[item["ref_group"]], groups))
            continue
        examples = item.get("examples")
        listed = [] if examples is None else examples if isinstance(examples, list) else [
            examples]
        out[item["ref"]] = AttributeRef(item["ref"], _requirement(item.get("requirement_level")),
                                        tuple(str(e) for e in listed))
    return out


def _attribute(raw: dict[str, Any]) -> AttributeDef:
    kind = raw["type"]
    if isinstance(kind, dict):
        return AttributeDef(raw["id"], "enum", tuple(str(m["value"]) for m in kind["members"]))
    return AttributeDef(raw["id"], str(kind))


@cache
def load(root: Path = ROOT) -> Model:
    files = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.yaml"))]
    attributes = {a.name: a for f in files for g in f.get("groups", ())
                  for a in map(_attribute, g.get("attributes", ()))}
    groups = {g["id"]: g.get("attributes", []) for f in files
              for g in f.get("attribute_groups", ())}
    metrics = {m["name"]: MetricDef(m["name"], m["instrument"], m["unit"],
                                    _refs(m.get("attributes", []), groups))
               for f in files for m in f.get("metrics", ())}
    refinements: dict[tuple[str, str], MetricDef] = {}
    for f in files:
        for r in f.get("metric_refinements", ()):
            base = metrics[r["ref"]]
            refs = {**base.attributes, **_refs(r.get("attributes", []), groups)}
            for component in refs.get("hw.type", AttributeRef("hw.type", "")).examples:
                refinements[(base.name, component)] = MetricDef(base.name, base.instrument,
                                                               base.unit, refs)
    return Model(metrics, refinements, attributes)


def definition(model: Model, metric: str, component: str) -> MetricDef | None:
    """What the conventions say of ``metric`` reported for a ``component`` (``hw.type``):
    its refinement for that component where there is one, else the metric itself."""
    return model.refinements.get((metric, component)) or model.metrics.get(metric)


def divergences(model: Model, metric: str, instrument: str, unit: str,
                attributes: dict[str, object]) -> list[str]:
    """How one data point of ``metric`` departs from the conventions ([] when it does not).

    The rules: the metric exists, with this instrument and unit; its required attributes are
    present; every attribute the conventions define (in their registries) is one the
    metric lists, of the registry's type, and -- for an enum, or where the metric's note
    restricts the values (the GPU refinement of ``hw.errors``) -- one of the allowed values.
    Attributes of our own namespaces (``gpu.*``, ``amd.*``) are extra, as the conventions
    allow."""
    component = str(attributes.get("hw.type", ""))
    found = definition(model, metric, component)
    if found is None:
        return [f"{metric}: not a metric of semantic conventions v{SEMCONV_VERSION}"]
    out = []
    if found.instrument != instrument:
        out.append(f"{metric}: instrument {instrument}, the conventions say {found.instrument}")
    if found.unit != unit:
        out.append(f"{metric}: unit {unit!r}, the conventions say {found.unit!r}")
    for ref in found.attributes.values():
        if ref.requirement == "required" and ref.name not in attributes:
            out.append(f"{metric}: required attribute {ref.name} missing")
    for key, value in attributes.items():
        known = model.attributes.get(key)
        if known is None:
            if key.startswith("hw."):
                out.append(f"{metric}: {key} is not an attribute of the conventions")
            continue  # our own namespace
        ref = found.attributes.get(key)
        if ref is None:
            out.append(f"{metric}: {key} is not an attribute of this metric")
            continue
        out += _value_divergences(metric, known, ref, value)
    return out


def _value_divergences(metric: str, known: AttributeDef, ref: AttributeRef,
                       value: object) -> list[str]:
    if known.type in ("string", "enum") and not isinstance(value, str):
        return [f"{metric}: {known.name}={value!r} is not a string"]
    if known.type == "int" and (not isinstance(value, int) or isinstance(value, bool)):
        return [f"{metric}: {known.name}={value!r} is not an int"]
    # A refinement that names its values (hw.errors of a GPU: corrected/uncorrected; hw.type
    # "MUST be set to gpu") restricts them; otherwise an enum's members do, unless its only
    # member is the catch-all _OTHER (error.type: open by design).
    restricted = ref.examples if ref.examples and known.name in ("error.type", "hw.type",
                                                                 "hw.state") else ()
    allowed = restricted or tuple(m for m in known.members if m != "_OTHER")
    if allowed and value not in allowed:
        return [f"{metric}: {known.name}={value!r} is not one of {list(allowed)}"]
    return []
