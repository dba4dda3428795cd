"""A stand-in Kubernetes API server that serves only discovery, so the real Helm engine
renders a chart with a cluster's capabilities.

``.Capabilities.APIVersions`` is what Helm learns from the API server's discovery documents
(``/api``, ``/apis``, ``/apis/GROUP/VERSION``); offline rendering knows only the built-in
APIs, never a CRD. A chart that makes a ServiceMonitor only where the Prometheus Operator's
CRD is installed must be rendered against a server that lists it or does not. Helm's
``install --dry-run=server`` reads discovery, fetches the OpenAPI document to validate the
manifests and looks each object up (every object is absent here: 404); nothing is created.
The OpenAPI v2 document served is an empty one (protobuf, as the client asks for), so Helm's
own validation passes and the manifests are validated by kubernetes-validate instead.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

KUBE_VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.0", "platform": "linux/amd64"}
# Built-in resources the chart makes: group/version -> {plural: (Kind, namespaced)}.
BUILTIN: dict[str, dict[str, tuple[str, bool]]] = {
    "v1": {"pods": ("Pod", True), "services": ("Service", True),
           "configmaps": ("ConfigMap", True), "secrets": ("Secret", True),
           "serviceaccounts": ("ServiceAccount", True), "namespaces": ("Namespace", False)},
    "apps/v1": {"daemonsets": ("DaemonSet", True)},
    "rbac.authorization.k8s.io/v1": {"clusterrolebindings": ("ClusterRoleBinding", False)},
}
# The Prometheus Operator's CRDs, as its discovery document names them.
MONITORING = {"monitoring.coreos.com/v1": {
    "servicemonitors": ("ServiceMonitor", True), "podmonitors": ("PodMonitor", True),
    "prometheusrules": ("PrometheusRule", True)}}

# gnostic's openapi_v2.Document {swagger: "2.0", info: {title: "k", version: "v1"}}.
_INFO = b"\x0a\x01k\x12\x02v1"
_OPENAPI_V2 = b"\x0a\x032.0\x12" + bytes([len(_INFO)]) + _INFO


def _resource_list(group_version: str, resources: Mapping[str, tuple[str, bool]]) -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": name, "singularName": "", "namespaced": namespaced,
                           "kind": kind, "verbs": ["get", "list", "create", "delete"]}
                          for name, (kind, namespaced) in resources.items()]}


def _documents(apis: Mapping[str, Mapping[str, tuple[str, bool]]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, str]]] = {}
    for group_version in apis:
        if "/" in group_version:
            group, version = group_version.split("/")
            groups.setdefault(group, []).append({"groupVersion": group_version,
                                                 "version": version})
    docs: dict[str, Any] = {
        "/version": KUBE_VERSION,
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": name, "versions": versions, "preferredVersion": versions[0]}
            for name, versions in groups.items()]},
        "/openapi/v3": {"paths": {}},
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": {
            "kind": "CustomResourceDefinitionList", "apiVersion": "apiextensions.k8s.io/v1",
            "metadata": {}, "items": []},
    }
    for group_version, resources in apis.items():
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        docs[path] = _resource_list(group_version, resources)
    return docs


@contextmanager
def discovery_server(crds: bool) -> Iterator[str]:
    """An API server URL whose discovery lists the built-in APIs, and the Prometheus
    Operator's CRDs when ``crds``."""
    docs = _documents({**BUILTIN, **(MONITORING if crds else {})})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/openapi/v2":
                self._send(200, _OPENAPI_V2,
                           "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
            elif path in docs:
                self._send(200, json.dumps(docs[path]).encode(), "application/json")
            else:
                self._send(404, json.dumps({"kind": "Status", "apiVersion": "v1",
                                            "status": "Failure", "reason": "NotFound",
                                            "code": 404}).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def install_release(chart: Path, values: dict[str, Any], crds: bool = True,
                    namespace: str = "monitoring") -> dict[str, Any]:
    """The release ``helm install --dry-run=server`` makes of ``chart`` on a cluster with
    (or without) the Prometheus Operator's CRDs: its ``manifest`` and ``notes``."""
    with discovery_server(crds) as url, helm.Chart.load(chart) as loaded:
        config = helm.Config(kube_apiserver=url, namespace=namespace)
        release: dict[str, Any] = config.install(loaded, "gpu", copy.deepcopy(values),
                                                 namespace=namespace, dry_run="server")
    return release


def install_manifests(chart: Path, values: dict[str, Any], crds: bool = True,
                      namespace: str = "monitoring") -> list[dict[str, Any]]:
    """The manifests of :func:`install_release`. Hooks (the helm test's pod) are not in a
    release's manifest."""
    release = install_release(chart, values, crds, namespace)
    return [d for d in yaml.safe_load_all(release["manifest"]) if d]
