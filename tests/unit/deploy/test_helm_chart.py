"""The Helm chart, linted and rendered by the real Helm v4 engine (helm-python-sdk), every
manifest validated against the Kubernetes schemas of two recent versions."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import AgentConfig
from tests.unit.deploy.kube_discovery import install_manifests

REPO = Path(__file__).resolve().parents[3]
DEFAULTS = AgentConfig()
CHART = REPO / "helm" / "gpu-otel-agent"
KUBE_VERSIONS = ("1.36.0", "1.37.0")
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}  # Prometheus Operator CRDs, checked below
# The eBPF plugin's documented set (gpu_otel_agent/plugins/ebpf/support.py): programs and
# tracepoints,
# uprobes (CAP_SYS_ADMIN since Linux 6.17), other containers' libraries via /proc/PID/root.
EBPF_CAPS = ["BPF", "PERFMON", "SYS_ADMIN", "SYS_PTRACE"]
TOGGLED: dict[str, Any] = {
    "otlp": {"endpoint": "https://otel-gateway.observability.svc:4317",
             "headers": {"authorization": "Bearer t0ken", "x-scope-orgid": "acme"},
             "caSecret": "gateway-ca"},
    "prometheus": {"scheme": "dcgm", "webConfig": {"existingSecret": "agent-web", "tls": True},
                   "dcgmExporterVersion": "4.5.3-4.8.2"},
    "service": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"},
                       "endpoint": {"scheme": "https", "tlsConfig": {"insecureSkipVerify": True}}},
    "prometheusRule": {"enabled": True},
    "attribution": {"processEvents": True},
    "health": {"kernelLog": True},
    "ebpf": {"enabled": True},
    "runtimeClassName": "nvidia",
    "tracing": {"enabled": True},
    "config": {"groups": {"fast": {"interval": 1}}},
}


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: helm.Chart, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    manifests = chart.render(values=copy.deepcopy(values or {}), name="gpu",
                             namespace="monitoring", is_install=True)
    docs = []
    for name, text in manifests.items():
        if name.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


@pytest.mark.parametrize("values", [{}, TOGGLED, {**TOGGLED, "npd": {"enabled": True}}],
                         ids=["default", "toggled", "toggled-npd"])
def test_lint_is_clean_in_strict_mode(values: dict[str, Any]) -> None:
    for version in KUBE_VERSIONS:
        report = helm.lint(CHART, copy.deepcopy(values), strict=True, namespace="monitoring",
                           kube_version=f"v{version}")
        assert report["errors"] == [], report
        assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


@pytest.mark.parametrize("values", [{}, TOGGLED, {**TOGGLED, "npd": {"enabled": True}}],
                         ids=["default", "toggled", "toggled-npd"])
def test_every_manifest_is_valid_for_two_kubernetes_versions(
    chart: helm.Chart, values: dict[str, Any],
) -> None:
    docs = render(chart, values)
    kinds = {d["kind"] for d in docs}
    assert {"DaemonSet", "ConfigMap", "ServiceAccount"} <= kinds
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)  # raises on any error
    if values:
        assert {"Service", "Secret"} <= kinds
        # The Prometheus Operator's objects only where its CRDs are (discovery lists them).
        assert {"ServiceMonitor", "PrometheusRule"} <= {
            d["kind"] for d in install_manifests(CHART, values)}


def test_a_manifest_with_a_typo_is_rejected(chart: helm.Chart) -> None:
    """The validation can fail: a misspelt field in the rendered DaemonSet is an error."""
    daemonset = of_kind(render(chart), "DaemonSet")
    daemonset["spec"]["template"]["spec"]["hostPid"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBE_VERSIONS[-1], strict=True)


def _container(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = of_kind(docs, "DaemonSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_default_daemonset_has_least_privilege(chart: helm.Chart) -> None:
    pod, container = _container(render(chart))
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}  # nothing added by default
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["hostPID"] is True
    assert "hostNetwork" not in pod and "hostIPC" not in pod
    assert pod["automountServiceAccountToken"] is False
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {"host-cgroup": "/sys/fs/cgroup",
                          "pod-resources": "/var/lib/kubelet/pod-resources",
                          "spool": "/var/lib/gpu-otel-agent",
                          # CDI spec directories: DRA claims tied to GPUs on the node
                          "cdi-0": "/etc/cdi", "cdi-1": "/var/run/cdi",
                          "local-endpoint": "/run/gpu-otel-agent"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    # Read-only, except the health events' spool (it must outlive the pod) and the directory
    # of the local endpoint's socket (gpu-agent top).
    assert [name for name in host_paths if not mounts[name].get("readOnly")] == [
        "spool", "local-endpoint"]
    assert pod["nodeSelector"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        pod["tolerations"]
    assert container["resources"]["limits"]["memory"] == "128Mi"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_features_add_only_the_capabilities_they_need(chart: helm.Chart) -> None:
    for values, added in (
        ({"ebpf": {"enabled": True}}, EBPF_CAPS),
        ({"ebpf": {"enabled": False, "processEvents": "netlink"}}, []),
        ({"health": {"kernelLog": True}}, ["SYSLOG"]),
        ({"attribution": {"processEvents": True}}, ["NET_ADMIN"]),
        # Process events from the eBPF plugin: no netlink, so no NET_ADMIN, no host network.
        ({"attribution": {"processEvents": True},
          "ebpf": {"enabled": True, "processEvents": "ebpf"}}, EBPF_CAPS),
        (TOGGLED, ["NET_ADMIN", "SYSLOG", *EBPF_CAPS]),
    ):
        pod, container = _container(render(chart, values))
        capabilities = container["securityContext"]["capabilities"]
        assert capabilities == ({"drop": ["ALL"], "add": added} if added
                                else {"drop": ["ALL"]}), values
        assert container["securityContext"]["privileged"] is False
        assert pod.get("hostNetwork", False) is ("NET_ADMIN" in added)


def _agent_config(chart: helm.Chart, values: dict[str, Any], tmp_path: Path) -> AgentConfig:
    path = tmp_path / "agent.yaml"
    path.write_text(of_kind(render(chart, values), "ConfigMap")["data"]["agent.yaml"],
                    encoding="utf-8")
    return load(path, environ={})  # the agent's own validation


def test_ebpf_value_turns_the_plugin_on_in_the_agent(chart: helm.Chart, tmp_path: Path) -> None:
    off = _agent_config(chart, {}, tmp_path)
    assert off.ebpf.enabled is False
    assert off.attribution.process_events == "netlink"
    on = _agent_config(chart, {"ebpf": {"enabled": True}}, tmp_path)
    assert on.ebpf.enabled is True
    assert on.attribution.process_events == "netlink"  # unless asked for
    events = _agent_config(chart, {"ebpf": {"enabled": True, "processEvents": "ebpf"}},
                           tmp_path)
    assert (events.ebpf.enabled, events.attribution.process_events) == (True, "ebpf")


def test_ebpf_process_events_without_the_plugin_is_refused(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmError, match=r"ebpf\.processEvents"):
        chart.render(values={"ebpf": {"processEvents": "ebpf"}}, name="gpu",
                     namespace="monitoring")


def test_node_selector_and_tolerations_can_be_overridden(chart: helm.Chart) -> None:
    # Helm merges maps: null removes the default label (--set nodeSelector.<label>=null).
    values = {"nodeSelector": {"feature.node.kubernetes.io/pci-10de.present": None,
                               "feature.node.kubernetes.io/pci-1002.present": "true"},
              "tolerations": []}
    pod, _ = _container(render(chart, values))
    assert pod["nodeSelector"] == {"feature.node.kubernetes.io/pci-1002.present": "true"}
    assert "tolerations" not in pod


def test_the_configmap_is_a_configuration_the_agent_accepts(
    chart: helm.Chart, tmp_path: Path,
) -> None:
    for values in ({}, TOGGLED):
        config_map = of_kind(render(chart, values), "ConfigMap")
        path = tmp_path / "agent.yaml"
        path.write_text(config_map["data"]["agent.yaml"], encoding="utf-8")
        config = load(path, environ={})  # the agent's own validation
        assert config.prometheus.enabled is True
        assert config.prometheus.listen == "0.0.0.0:9400"
        assert config.attribution.kubelet.socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
        assert config.health.spool_path == "/var/lib/gpu-otel-agent/events"  # on the host mount
        assert config.health.kmsg is bool(values)  # only where /dev/kmsg is mounted
    assert config.prometheus.scheme == "dcgm"
    assert config.prometheus.dcgm_exporter_version == "4.5.3-4.8.2"
    assert config.prometheus.web_config_file == "/etc/gpu-otel-agent/web/web-config.yml"
    assert config.otlp.endpoint == "https://otel-gateway.observability.svc:4317"
    assert config.otlp.certificate == "/etc/gpu-otel-agent/otlp-ca/ca.crt"
    assert config.groups["fast"].interval == 1  # values.config merged over the chart's
    assert config.tracing.enabled is True


def test_the_cdi_spec_directories_are_mounted_where_the_agent_reads_them(
    chart: helm.Chart,
) -> None:
    pod, container = _container(render(chart))
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/cdi"]["readOnly"] and mounts["/var/run/cdi"]["readOnly"]
    # The agent reads <dra_host_root>/etc/cdi and var/run/cdi; the chart leaves the root "/".
    assert DEFAULTS.attribution.kubelet.dra_host_root == "/"
    pod, container = _container(render(chart, {"attribution": {"cdiSpecDirs": []}}))
    assert not [v for v in pod["volumes"] if v["name"].startswith("cdi-")]


def test_otlp_headers_come_from_a_secret(chart: helm.Chart) -> None:
    docs = render(chart, TOGGLED)
    secret = of_kind(docs, "Secret")
    assert secret["stringData"] == {"headers": "authorization=Bearer t0ken,x-scope-orgid=acme"}
    _, container = _container(docs)
    env = {e["name"]: e for e in container["env"]}
    assert env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"], "key": "headers"}
    assert "t0ken" not in yaml.safe_dump(of_kind(docs, "ConfigMap"))  # never in the ConfigMap
    own = render(chart, {"otlp": {"existingSecret": "mine", "existingSecretKey": "h"}})
    assert not [d for d in own if d["kind"] == "Secret"]
    _, container = _container(own)
    env = {e["name"]: e for e in container["env"]}
    assert env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"]["secretKeyRef"] == {
        "name": "mine", "key": "h"}


def test_service_monitor_and_prometheus_rule() -> None:
    docs = install_manifests(CHART, TOGGLED)
    service = of_kind(docs, "Service")
    monitor = of_kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" == service["spec"]["ports"][0]["name"]
    assert endpoint["scheme"] == "https"
    rule = of_kind(docs, "PrometheusRule")
    shipped = yaml.safe_load((REPO / "otel-config" / "alerts" / "gpu-alerts.rules.yaml")
                             .read_text())
    assert rule["spec"] == shipped
    _, container = _container(docs)
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_chart_rules_file_is_the_tested_one() -> None:
    assert (CHART / "files" / "gpu-alerts.rules.yaml").read_bytes() == \
        (REPO / "otel-config" / "alerts" / "gpu-alerts.rules.yaml").read_bytes()


@pytest.mark.parametrize("values", [
    {"prometheus": {"scheme": "prom"}},
    {"otlp": {"endpoint": "collector:4317"}},
    {"unknownKey": 1},
    {"attribution": {"processEvents": "yes"}},
    {"ebpf": {"enabled": True, "processEvents": "kprobe"}},
    {"ebpf": {"enabled": "yes"}},
])
def test_values_schema_rejects_bad_values(chart: helm.Chart, values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError):
        chart.render(values=values, name="gpu", namespace="monitoring")


def test_agent_resource_names_its_pod_by_ip_and_node_from_the_downward_api(
    chart: helm.Chart,
) -> None:
    _, container = _container(render(chart))
    env = {e["name"]: e for e in container["env"]}
    assert env["OTEL_RESOURCE_ATTRIBUTES"]["value"] == "k8s.pod.ip=$(POD_IP),k8s.pod.uid=$(POD_UID)"
    assert env["POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    names = [e["name"] for e in container["env"]]
    for name in ("POD_IP", "POD_UID"):  # defined first
        assert names.index(name) < names.index("OTEL_RESOURCE_ATTRIBUTES")
    assert env["K8S_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_the_hpa_example_is_valid_and_uses_the_adapter_metric() -> None:
    hpa = yaml.safe_load((REPO / "helm" / "examples" / "gpu-hpa.yaml").read_text())
    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(hpa, version, strict=True)
    (metric,) = hpa["spec"]["metrics"]
    adapter = yaml.safe_load((REPO / "helm" / "examples" / "prometheus-adapter-values.yaml")
                             .read_text())
    served = {rule["seriesQuery"].split("{", 1)[0] for rule in adapter["rules"]["custom"]}
    assert metric["pods"]["metric"]["name"] in served


@pytest.mark.parametrize("values", [{}, TOGGLED], ids=["default", "toggled"])
def test_helm_test_runs_check_in_a_pod_set_up_like_the_agent(
        chart: helm.Chart, values: dict[str, Any]) -> None:
    docs = render(chart, values)
    pod, agent = _container(docs)
    (check,) = [d for d in docs if d["kind"] == "Pod"]
    assert check["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = check["spec"]
    (container,) = spec["containers"]
    assert container["args"] == ["check", "--config", "/etc/gpu-otel-agent/agent.yaml"]
    assert spec["restartPolicy"] == "Never"
    # What check checks is what the agent gets: the same node, host paths, mounts,
    # environment, image and privileges.
    for key in ("volumes", "nodeSelector", "tolerations", "hostPID", "hostNetwork",
                "runtimeClassName"):
        assert spec.get(key) == pod.get(key), key
    for key in ("image", "env", "volumeMounts", "securityContext"):
        assert container[key] == agent[key], key
    assert not [d for d in render(chart, {**values, "test": {"enabled": False}})
                if d["kind"] == "Pod"]


def test_the_local_endpoint_socket_is_in_the_mounted_host_directory(
        chart: helm.Chart, tmp_path: Path) -> None:
    config = _agent_config(chart, {}, tmp_path)
    _, container = _container(render(chart))
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "local-endpoint"]
    assert config.local_endpoint.enabled
    assert Path(config.local_endpoint.socket).parent == Path(mount["mountPath"])
    off = _agent_config(chart, {"localEndpoint": {"enabled": False}}, tmp_path)
    assert not off.local_endpoint.enabled
    _, container = _container(render(chart, {"localEndpoint": {"enabled": False}}))
    assert "local-endpoint" not in {m["name"] for m in container["volumeMounts"]}


def test_npd_sidecar_runs_the_plugin_config_with_a_token_of_its_own(chart: helm.Chart) -> None:
    """npd.enabled: NPD's binary (copied from its image) runs in the agent's image beside
    `gpu-agent`, reads the shipped custom-plugin config, shares the agent's socket directory
    and alone gets an API token, bound to the role Kubernetes bootstraps for NPD."""
    assert not [d for d in render(chart) if d["metadata"]["name"].endswith("-npd")]
    docs = render(chart, {"npd": {"enabled": True}})
    pod = of_kind(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    agent, npd = pod["containers"]
    (init,) = pod["initContainers"]
    assert init["image"] == "registry.k8s.io/node-problem-detector/node-problem-detector:v1.36.0"
    assert init["command"] == ["cp", "/node-problem-detector", "/npd/node-problem-detector"]
    assert npd["image"] == agent["image"]
    assert npd["command"][0] == "/npd/node-problem-detector"
    assert "--config.custom-plugin-monitor=/etc/npd/gpu-monitor.json" in npd["command"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} \
        in npd["env"]
    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert token in {m["mountPath"] for m in npd["volumeMounts"]}
    assert token not in {m["mountPath"] for m in agent["volumeMounts"]}
    # The agent's socket directory (a host directory), read-only for NPD.
    shared = {m["name"]: m for m in npd["volumeMounts"]}
    assert shared["local-endpoint"]["mountPath"] == "/run/gpu-otel-agent"
    assert shared["local-endpoint"]["readOnly"] is True
    assert {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}["local-endpoint"] == \
        "/run/gpu-otel-agent"
    with pytest.raises(Exception, match=r"npd\.enabled needs localEndpoint\.enabled"):
        render(chart, {"npd": {"enabled": True}, "localEndpoint": {"enabled": False}})
    config = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-npd"))
    assert json.loads(config["data"]["gpu-monitor.json"]) == json.loads(
        (CHART / "files" / "npd-gpu-monitor.json").read_text(encoding="utf-8"))
    binding = of_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "system:node-problem-detector"
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
