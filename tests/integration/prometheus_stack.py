"""A real Prometheus, Alertmanager and webhook receiver on loopback, for the scrape tests.

The binaries come from Debian's ``prometheus`` and ``prometheus-alertmanager`` packages
(``.ci/run`` installs them). Intervals are 1 s so a whole scenario takes seconds.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.receivers.netutil import free_port

PROMETHEUS = "prometheus"
ALERTMANAGER = "prometheus-alertmanager"


def binaries_missing() -> str | None:
    missing = [b for b in (PROMETHEUS, ALERTMANAGER) if shutil.which(b) is None]
    if missing:
        return (f"{', '.join(missing)} not installed "
                "(apt-get install prometheus prometheus-alertmanager; .ci/run does)")
    return None


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited: {log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready in 30 s: {log.read_text(errors='replace')[-3000:]}")


class Webhook:
    """Alertmanager's webhook receiver: keeps every notification it is sent."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        received = self.notifications
        lock = threading.Lock()
        self._lock = lock

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server dispatches by name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    received.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/alerts"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def alerts(self) -> list[dict[str, Any]]:
        with self._lock:
            return [alert for n in self.notifications for alert in n["alerts"]]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass(frozen=True)
class Exchange:
    """One request through a RecordingProxy: header fields (lower-case names) both ways."""

    path: str
    request: Mapping[str, str]
    response: Mapping[str, str]
    body_bytes: int


def _read_head(sock: socket.socket, buffer: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    buffer[:] = rest
    return head


def _fields(head: bytes) -> tuple[str, dict[str, str]]:
    first, *lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return first, fields


class RecordingProxy:
    """An HTTP/1.1 proxy between Prometheus and an agent that records what each side sent
    (what Prometheus asks for, what the agent answered). ``accept``, if given, replaces the
    scraper's Accept header and drops Accept-Encoding: an older scraper, for the fallback."""

    def __init__(self, upstream: str, accept: str | None = None) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._accept = accept
        self.exchanges: list[Exchange] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self._upstream, timeout=30)
        from_client, from_upstream = bytearray(), bytearray()
        try:
            while (head := _read_head(client, from_client)) is not None:
                if self._accept is not None:
                    lines = [h for h in head.decode("latin-1").split("\r\n")
                             if not h.lower().startswith(("accept:", "accept-encoding:"))]
                    head = "\r\n".join([*lines, f"Accept: {self._accept}"]).encode("latin-1")
                line, request = _fields(head)  # as the agent receives it
                upstream.sendall(head + b"\r\n\r\n")
                answer = _read_head(upstream, from_upstream)
                if answer is None:
                    return
                _, response = _fields(answer)
                length = int(response.get("content-length", "0"))
                while len(from_upstream) < length:
                    chunk = upstream.recv(65536)
                    if not chunk:
                        return
                    from_upstream += chunk
                body = bytes(from_upstream[:length])
                del from_upstream[:length]
                self.exchanges.append(Exchange(line.split(" ")[1], request, response, length))
                client.sendall(answer + b"\r\n\r\n" + body)
        except OSError:
            pass
        finally:
            upstream.close()
            client.close()

    def metrics_exchanges(self) -> list[Exchange]:
        return [e for e in list(self.exchanges) if e.path.startswith("/metrics")]

    def close(self) -> None:
        self._listener.close()


class Stack:
    """Prometheus scraping ``targets`` (job -> host:port), rules, Alertmanager, webhook."""

    def __init__(self, workdir: Path, targets: dict[str, str], rule_files: Sequence[Path],
                 job_extra: Mapping[str, Mapping[str, Any]] | None = None, *,
                 prometheus: str = PROMETHEUS, prometheus_args: Sequence[str] = ()) -> None:
        """``prometheus``/``prometheus_args``: another Prometheus binary and its flags (the
        OTLP tests' Prometheus 3 with ``--web.enable-otlp-receiver``)."""
        self.workdir = workdir
        self._job_extra = job_extra or {}
        self._binary = prometheus
        self._args = list(prometheus_args)
        self.webhook = Webhook()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []
        try:
            self._start_alertmanager()
            self._start_prometheus(targets, rule_files)
        except BaseException:
            self.close()
            raise

    def _spawn(self, name: str, command: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.workdir / f"{name}.log"
        handle = log.open("wb")
        self._logs.append(handle)
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                                   cwd=self.workdir)
        self._processes.append(process)
        return process, log

    def _start_alertmanager(self) -> None:
        port = free_port()
        config = {
            "route": {"receiver": "test", "group_by": ["alertname", "hw_id"],
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "test", "webhook_configs": [
                {"url": self.webhook.url, "send_resolved": True}]}],
        }
        path = self.workdir / "alertmanager.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        process, log = self._spawn("alertmanager", [
            ALERTMANAGER, f"--config.file={path}", f"--storage.path={self.workdir / 'am'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
        ])
        self.alertmanager = f"http://127.0.0.1:{port}"
        _wait_ready(self.alertmanager + "/-/ready", process, log, "alertmanager")

    def _start_prometheus(self, targets: dict[str, str], rule_files: Sequence[Path]) -> None:
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": [str(p) for p in rule_files],
            "alerting": {"alertmanagers": [{"static_configs": [
                {"targets": [self.alertmanager.removeprefix("http://")]}]}]},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [target]}],
                 **self._job_extra.get(job, {})}
                for job, target in targets.items()
            ],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        process, log = self._spawn("prometheus", [
            self._binary, f"--config.file={path}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}", *self._args,
        ])
        self.prometheus = f"http://127.0.0.1:{port}"
        self._prometheus_log = log
        _wait_ready(self.prometheus + "/-/ready", process, log, "prometheus")

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        answer = _get_json(url)
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def wait_query(self, promql: str, accept: Callable[[list[dict[str, Any]]], bool],
                   timeout: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if accept(result):
                return result
            time.sleep(0.25)
        raise AssertionError(f"{promql}: last result {result}\n"
                             f"prometheus log: {self._prometheus_log.read_text()[-2000:]}")

    def target_metadata(self, job: str, metric: str) -> list[dict[str, Any]]:
        """What Prometheus recorded of a metric family's TYPE from the job's scrapes."""
        query = urllib.parse.urlencode({"match_target": f'{{job="{job}"}}', "metric": metric})
        answer = _get_json(f"{self.prometheus}/api/v1/targets/metadata?{query}")
        data: list[dict[str, Any]] = answer["data"]
        return data

    def targets_health(self) -> dict[str, str]:
        answer = _get_json(self.prometheus + "/api/v1/targets")
        return {t["labels"]["job"]: t["health"] + " " + t.get("lastError", "")
                for t in answer["data"]["activeTargets"]}

    def close(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for handle in self._logs:
            handle.close()
        self.webhook.close()
