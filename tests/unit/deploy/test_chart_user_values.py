"""The values users of NVIDIA's dcgm-exporter chart and AMD's device-metrics-exporter chart
already write, taken by this chart with the same spelling and shape.

The shapes are those of the two charts' values.yaml (NVIDIA/dcgm-exporter deployment/, at
d5e5f51, 2026-05-12; ROCm/device-metrics-exporter helm-charts/, at afd0fe8, 2026-08-21),
examples included where they give one. Each set is rendered by the real Helm engine against
an API server whose discovery lists the Prometheus Operator's CRDs (tests/unit/deploy/
kube_discovery.py), every built-in manifest validated against the Kubernetes schemas of two
versions, and its effect checked on the rendered objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest

from tests.unit.deploy.kube_discovery import install_manifests, install_release
from tests.unit.deploy.test_helm_chart import CHART, CRD_KINDS, KUBE_VERSIONS, render

Docs = list[dict[str, Any]]


def install(values: dict[str, Any], crds: bool = True) -> Docs:
    """The manifests Helm would install on a cluster with (or without) the CRDs."""
    return install_manifests(CHART, values, crds)


def kinds(docs: Docs, kind: str) -> Docs:
    return [d for d in docs if d["kind"] == kind]


def pod_spec(docs: Docs) -> dict[str, Any]:
    (daemonset,) = kinds(docs, "DaemonSet")
    spec: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return spec


def agent(docs: Docs) -> dict[str, Any]:
    container: dict[str, Any] = pod_spec(docs)["containers"][0]
    return container


def endpoint(docs: Docs, kind: str) -> dict[str, Any]:
    (monitor,) = kinds(docs, kind)
    key = "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"
    (first,) = monitor["spec"][key]
    result: dict[str, Any] = first
    return result


# dcgm-exporter's default container securityContext (values.yaml).
DCGM_SECURITY = {"runAsNonRoot": False, "runAsUser": 0,
                 "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]},
                 "allowPrivilegeEscalation": False}
# dcgm-exporter's examples of relabelings and metricRelabelings (values.yaml comments).
DCGM_RELABELING = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "separator": ";",
                   "regex": "^(.*)$", "targetLabel": "nodename", "replacement": "$1",
                   "action": "replace"}
DCGM_METRIC_RELABELING = {"action": "replace", "regex": "original_metrics_name",
                          "replacement": "new_metrics_name", "sourceLabels": ["name"],
                          "targetLabel": "__name__"}
# dcgm-exporter's default extra volume and mount (a ConfigMap of counters).
METRICS_VOLUME = {"name": "exporter-metrics-volume",
                  "configMap": {"name": "exporter-metrics-config-map",
                                "items": [{"key": "metrics", "path": "default-counters.csv"}]}}
METRICS_MOUNT = {"name": "exporter-metrics-volume",
                 "mountPath": "/etc/dcgm-exporter/default-counters.csv",
                 "subPath": "default-counters.csv"}


def _pod_security(docs: Docs) -> None:
    assert pod_spec(docs)["securityContext"] == {"fsGroup": 2000,
                                                 "seccompProfile": {"type": "RuntimeDefault"}}


def _dcgm_security(docs: Docs) -> None:
    security = agent(docs)["securityContext"]
    assert security["capabilities"] == {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True  # the chart's, not overridden
    assert security["privileged"] is False


def _non_root(docs: Docs) -> None:
    security = agent(docs)["securityContext"]
    assert (security["runAsNonRoot"], security["runAsUser"]) == (True, 1000)
    assert security["capabilities"] == {"drop": ["ALL"]}


def _host_network(docs: Docs) -> None:
    spec = pod_spec(docs)
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"  # cluster DNS still resolves


def _honor_labels(expected: bool) -> Callable[[Docs], None]:
    def check(docs: Docs) -> None:
        assert endpoint(docs, "ServiceMonitor")["honorLabels"] is expected
    return check


def _relabelings(docs: Docs) -> None:
    relabelings = endpoint(docs, "ServiceMonitor")["relabelings"]
    assert relabelings[-1] == DCGM_RELABELING
    assert relabelings[0]["targetLabel"] == "node"  # the chart's own stays first


def _metric_relabelings(docs: Docs) -> None:
    assert endpoint(docs, "ServiceMonitor")["metricRelabelings"] == [DCGM_METRIC_RELABELING]


def _additional_labels(docs: Docs) -> None:
    (monitor,) = kinds(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["monitoring"] == "prometheus"


def _amd_service_monitor(docs: Docs) -> None:
    (monitor,) = kinds(docs, "ServiceMonitor")
    assert monitor["spec"]["attachMetadata"] == {"node": True}
    point = endpoint(docs, "ServiceMonitor")
    assert (point["honorLabels"], point["honorTimestamps"], point["interval"]) == (
        True, True, "30s")


def _extra_volumes(docs: Docs) -> None:
    assert METRICS_VOLUME in pod_spec(docs)["volumes"]
    assert METRICS_MOUNT in agent(docs)["volumeMounts"]


def _pod_monitor(docs: Docs) -> None:
    assert not kinds(docs, "ServiceMonitor")
    (monitor,) = kinds(docs, "PodMonitor")
    (daemonset,) = kinds(docs, "DaemonSet")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        daemonset["spec"]["template"]["metadata"]["labels"].items()
    point = endpoint(docs, "PodMonitor")
    assert point["port"] == agent(docs)["ports"][0]["name"]
    assert point["honorLabels"] is True  # the dcgm scheme below


def _namespace_override(docs: Docs) -> None:
    namespaced = [d for d in docs if d["kind"] != "ClusterRoleBinding"]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"gpu-monitoring"}
    (monitor,) = kinds(docs, "ServiceMonitor")
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["gpu-monitoring"]
    (binding,) = kinds(docs, "ClusterRoleBinding")
    assert binding["subjects"][0]["namespace"] == "gpu-monitoring"


def _priority(expected: str | None) -> Callable[[Docs], None]:
    def check(docs: Docs) -> None:
        assert pod_spec(docs).get("priorityClassName") == expected
    return check


MONITOR = {"enabled": True}
CASES: dict[str, tuple[dict[str, Any], Callable[[Docs], None]]] = {
    "podSecurityContext": ({"podSecurityContext": {"fsGroup": 2000}}, _pod_security),
    "securityContext (dcgm-exporter's default)": ({"securityContext": DCGM_SECURITY},
                                                  _dcgm_security),
    "securityContext (non-root)": ({"securityContext": {"runAsNonRoot": True,
                                                        "runAsUser": 1000}}, _non_root),
    "hostNetwork": ({"hostNetwork": True}, _host_network),
    "serviceMonitor.honorLabels": ({"serviceMonitor": {**MONITOR, "honorLabels": True}},
                                   _honor_labels(True)),
    "serviceMonitor.relabelings": ({"serviceMonitor": {**MONITOR,
                                                       "relabelings": [DCGM_RELABELING]}},
                                   _relabelings),
    "serviceMonitor.metricRelabelings": (
        {"serviceMonitor": {**MONITOR, "metricRelabelings": [DCGM_METRIC_RELABELING]}},
        _metric_relabelings),
    "serviceMonitor.additionalLabels": (
        {"serviceMonitor": {**MONITOR, "additionalLabels": {"monitoring": "prometheus"}}},
        _additional_labels),
    "serviceMonitor (device-metrics-exporter's)": (
        {"serviceMonitor": {**MONITOR, "interval": "30s", "honorLabels": True,
                            "honorTimestamps": True, "attachMetadata": {"node": True},
                            "labels": {}, "relabelings": [], "metricRelabelings": []}},
        _amd_service_monitor),
    "extraVolumes and extraVolumeMounts": ({"extraVolumes": [METRICS_VOLUME],
                                            "extraVolumeMounts": [METRICS_MOUNT]},
                                           _extra_volumes),
    "podMonitor": ({"prometheus": {"scheme": "dcgm"}, "podMonitor": MONITOR}, _pod_monitor),
    "namespaceOverride": ({"namespaceOverride": "gpu-monitoring", "serviceMonitor": MONITOR,
                           "npd": {"enabled": True}}, _namespace_override),
    "priorityClassName (device-metrics-exporter's default)": ({"priorityClassName": ""},
                                                              _priority(None)),
}


@pytest.fixture(scope="module")
def rendered() -> Iterator[dict[str, Docs]]:
    yield {name: install(values) for name, (values, _) in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_a_value_set_users_write_renders_valid_manifests_that_do_what_it_says(
    rendered: dict[str, Docs], name: str,
) -> None:
    docs = rendered[name]
    for doc in docs:
        if doc["kind"] in CRD_KINDS | {"PodMonitor"}:
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
    _, check = CASES[name]
    check(docs)


def test_the_default_priority_class_is_system_node_critical() -> None:
    """A monitoring DaemonSet should not be the first pod evicted (dcgm-exporter's default)."""
    _priority("system-node-critical")(install({}))
    (check,) = [d for d in render_check_pod({})]
    assert check["spec"].get("priorityClassName") is None  # the test pod is not critical


def render_check_pod(values: dict[str, Any]) -> Docs:
    with helm.Chart.load(CHART) as chart:
        return [d for d in render(chart, values) if d["kind"] == "Pod"]


def test_honor_labels_defaults_to_true_in_the_dcgm_schemes_only() -> None:
    """The dcgm scheme's series carry the workload's pod/namespace/container labels, which
    the target's own labels would rename exported_pod ... unless honored; the otel scheme's
    are k8s_pod_name ..., which clash with none."""
    for scheme in ("dcgm", "dcgm-4.9"):
        _honor_labels(True)(install({"prometheus": {"scheme": scheme},
                                     "serviceMonitor": MONITOR}))
    _honor_labels(False)(install({"serviceMonitor": MONITOR}))
    _honor_labels(False)(install({"prometheus": {"scheme": "dcgm"},
                                  "serviceMonitor": {**MONITOR, "honorLabels": False}}))


def test_monitors_and_rules_are_made_only_where_their_crds_are() -> None:
    values = {"serviceMonitor": MONITOR, "prometheusRule": {"enabled": True}}
    with_crds = {d["kind"] for d in install(values)}
    assert {"ServiceMonitor", "PrometheusRule"} <= with_crds
    without = {d["kind"] for d in install(values, crds=False)}
    assert not without & {"ServiceMonitor", "PrometheusRule"}
    assert "DaemonSet" in without  # the rest installs
    pods = {d["kind"] for d in install({"podMonitor": MONITOR}, crds=False)}
    assert "PodMonitor" not in pods
    # The notes say what was left out and why.
    notes = install_release(CHART, values, crds=False)["notes"]
    assert "WARNING: no ServiceMonitor was made" in notes
    assert "WARNING: no PrometheusRule was made" in notes
    assert "WARNING" not in install_release(CHART, {**values, "otlp": {
        "endpoint": "http://gateway:4317"}})["notes"]


def test_a_service_monitor_and_a_pod_monitor_together_are_refused() -> None:
    with pytest.raises(helm.HelmError, match="choose one"):
        install({"serviceMonitor": MONITOR, "podMonitor": MONITOR})


@pytest.mark.parametrize("values", [
    {"hostNetwork": "yes"},
    {"namespaceOverride": "Not_A_Namespace"},
    {"extraVolumeMounts": [{"name": "x"}]},  # no mountPath
    {"serviceMonitor": {"honorLabels": "true"}},
    {"podMonitor": {"attachMetadata": {"nodes": True}}},
])
def test_malformed_user_values_are_refused(values: dict[str, Any]) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmError):
        chart.render(values=values, name="gpu", namespace="monitoring")
