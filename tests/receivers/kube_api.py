"""A Kubernetes API server on loopback serving the list and watch calls an informer makes
(client-go's reflector), for the collector's k8s_attributes processor.

It serves the objects it is given (pods, and empty lists of anything else asked for) as the
real API server's JSON: a list answers ``{"kind": "PodList", "metadata": {"resourceVersion":
...}, "items": [...]}``; a watch is a chunked stream of ``{"type": ..., "object": ...}`` lines
that stays open (with the initial ADDED events and the BOOKMARK that ends them when the
client asks for them with ``sendInitialEvents=true``, client-go's streaming list). Plain HTTP,
no authentication: the collector reaches it through a kubeconfig (``auth_type: kubeConfig``).
Every request is recorded, so a test can tell what the processor asked for.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

RESOURCE_VERSION = "100"
# path -> (list kind, item kind, apiVersion) of the collections this server knows.
_KINDS = {
    "/api/v1/pods": ("PodList", "Pod", "v1"),
    "/api/v1/namespaces": ("NamespaceList", "Namespace", "v1"),
    "/api/v1/nodes": ("NodeList", "Node", "v1"),
    "/apis/apps/v1/replicasets": ("ReplicaSetList", "ReplicaSet", "apps/v1"),
    "/apis/apps/v1/deployments": ("DeploymentList", "Deployment", "apps/v1"),
    "/apis/apps/v1/daemonsets": ("DaemonSetList", "DaemonSet", "apps/v1"),
    "/apis/apps/v1/statefulsets": ("StatefulSetList", "StatefulSet", "apps/v1"),
    "/apis/batch/v1/jobs": ("JobList", "Job", "batch/v1"),
}


def pod(name: str, namespace: str, uid: str, *, node: str, ip: str, host_network: bool,
        labels: Mapping[str, str] | None = None,
        owner: tuple[str, str] | None = None) -> dict[str, Any]:
    """A running pod as the API server returns it (the fields the processor reads)."""
    metadata: dict[str, Any] = {
        "name": name, "namespace": namespace, "uid": uid, "resourceVersion": RESOURCE_VERSION,
        "creationTimestamp": "2026-11-27T00:00:00Z", "labels": dict(labels or {}),
    }
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0],
                                        "name": owner[1], "uid": f"{uid}-owner",
                                        "controller": True}]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"nodeName": node, "hostNetwork": host_network,
                 "containers": [{"name": "agent", "image": "gpu-otel-agent:test"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                   "hostIP": ip if host_network else "127.0.0.1",
                   "startTime": "2026-11-27T00:00:00Z"},
    }


class KubeApi:
    """Serves ``pods`` (and empty collections of the other kinds) until closed."""

    def __init__(self, pods: Sequence[dict[str, Any]]) -> None:
        self.requests: list[str] = []
        self._closing = threading.Event()
        objects = {"/api/v1/pods": list(pods)}
        requests, closing = self.requests, self._closing

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # http.server dispatches by name
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                requests.append(self.path)
                kinds = _KINDS.get(url.path)
                if kinds is None:
                    self._json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "NotFound", "code": 404})
                    return
                items = [{**o, "kind": kinds[1], "apiVersion": kinds[2]}
                         for o in objects.get(url.path, [])]
                if query.get("watch") == ["true"] or query.get("watch") == ["1"]:
                    self._watch(items, initial=query.get("sendInitialEvents") == ["true"],
                                kinds=kinds)
                    return
                self._json(200, {"kind": kinds[0], "apiVersion": kinds[2],
                                 "metadata": {"resourceVersion": RESOURCE_VERSION},
                                 "items": items})

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, event: dict[str, Any]) -> None:
                data = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _watch(self, items: list[dict[str, Any]], *, initial: bool,
                       kinds: tuple[str, str, str]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    if initial:
                        for item in items:
                            self._chunk({"type": "ADDED", "object": item})
                        self._chunk({"type": "BOOKMARK", "object": {
                            "kind": kinds[1], "apiVersion": kinds[2],
                            "metadata": {"resourceVersion": RESOURCE_VERSION, "annotations": {
                                "k8s.io/initial-events-end": "true"}}}})
                    # Nothing changes on this cluster: the watch stays open, quiet.
                    closing.wait()
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig naming this server (for ``auth_type: kubeConfig`` via KUBECONFIG)."""
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }), encoding="utf-8")
        return path

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
