"""Hostile peers against a running agent (issue 39): the agent on the 8-GPU node serves
/metrics over TLS with basic auth, and exports over OTLP/HTTP to a collector that answers
every request with a huge body. Against it, in turn:

- idle TLS waves: ``waves`` x ``per_wave`` TCP connections that never send a ClientHello,
  each wave held until the server has closed every one (its handshake deadline);
- a password flood: ``flood_clients`` clients sending wrong passwords for ``flood_s``, while
  /healthz is probed and a known scraper scrapes, one after another;
- the body flood runs throughout (the collector's answers).

Reported: the agent's resident set (baseline after warm-up, peak over the whole case), how
many silent connections the server closed, the probe's and the scrape's latency during the
flood (median and worst), guesses answered (401, 429), exports answered with the big body.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import bcrypt

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.bench.results import HostilePeerResult
from tests.integration.harness import AgentProcess
from tests.polling import wait_until
from tests.receivers.flooding import HttpFlood
from tests.receivers.hostile import (
    PasswordFlood,
    close_all,
    closed_by_server,
    get,
    rss_mib,
    silent_connections,
    timed,
)

USER, PASSWORD = "prometheus", "right-password"


@dataclass(frozen=True)
class HostileCase:
    name: str
    scenario: Path
    waves: int = 3
    per_wave: int = 500
    flood_clients: int = 64
    flood_s: float = 30.0
    body_mib: int = 128
    bcrypt_cost: int = 10


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _web_config(directory: Path, cost: int) -> Path:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(directory / "key.pem"),
         "-out", str(directory / "cert.pem")], check=True, capture_output=True)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(cost)).decode()
    web = directory / "web.yml"
    web.write_text("tls_server_config: {cert_file: cert.pem, key_file: key.pem}\n"
                   f"basic_auth_users: {{{USER}: '{hashed}'}}\n", encoding="utf-8")
    return web


def run_hostile_case(case: HostileCase, workdir: Path) -> HostilePeerResult:
    workdir.mkdir(parents=True, exist_ok=True)
    web = _web_config(workdir, case.bcrypt_cost)
    port = _free_port()
    config = workdir / "agent.yaml"
    config.write_text(f"prometheus: {{enabled: true, listen: '127.0.0.1:{port}', "
                      f"web_config_file: '{web}'}}\n", encoding="utf-8")
    with SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node, \
            HttpFlood(case.body_mib << 20) as collector:
        agent = AgentProcess(workdir, collector.endpoint, node.env,
                             ["--config", str(config), "--interval", "1",
                              "--export-interval", "1"],
                             env={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        try:
            agent.serving(port, timeout=60)
            pid = agent.process.pid
            wait_until(lambda: get(port, "/healthz") == 200, timeout=60)
            wait_until(lambda: collector.requests >= 2, timeout=60)
            assert get(port, "/metrics", (USER, PASSWORD)) == 200
            baseline = peak = rss_mib(pid)
            exports_before = collector.requests

            closed = 0
            for _ in range(case.waves):
                wave = silent_connections(port, case.per_wave)
                try:
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline:
                        peak = max(peak, rss_mib(pid))
                        shut = sum(1 for sock in wave if closed_by_server(sock))
                        if shut == len(wave):
                            break
                        time.sleep(0.2)
                    closed += sum(1 for sock in wave if closed_by_server(sock))
                finally:
                    close_all(wave)
            after_waves = rss_mib(pid)

            probes: list[float] = []
            scrapes: list[float] = []
            flood = PasswordFlood(port, case.flood_clients).start()
            try:
                end = time.monotonic() + case.flood_s
                while time.monotonic() < end:
                    status, sent, done = timed(lambda: get(port, "/healthz"))
                    if status == 200:
                        probes.append(done - sent)
                    status, sent, done = timed(lambda: get(port, "/metrics",
                                                           (USER, PASSWORD)))
                    if status == 200:
                        scrapes.append(done - sent)
                    peak = max(peak, rss_mib(pid))
                    time.sleep(0.2)
            finally:
                flood.stop()
            peak = max(peak, rss_mib(pid))
            statuses = [status for _, status in flood.answers]
            exports = collector.requests - exports_before
            agent.shutdown()
        finally:
            agent.close()
    return HostilePeerResult(
        case=case.name, scenario=case.scenario.name, waves=case.waves, per_wave=case.per_wave,
        closed_by_server=closed, flood_clients=case.flood_clients, flood_s=case.flood_s,
        bcrypt_cost=case.bcrypt_cost, body_mib=case.body_mib,
        baseline_rss_mib=round(baseline, 1), after_waves_rss_mib=round(after_waves, 1),
        peak_rss_mib=round(peak, 1), probes=len(probes),
        probe_ms_median=_ms(statistics.median(probes) if probes else 0.0),
        probe_ms_max=_ms(max(probes, default=0.0)), scrapes=len(scrapes),
        scrape_ms_median=_ms(statistics.median(scrapes) if scrapes else 0.0),
        scrape_ms_max=_ms(max(scrapes, default=0.0)),
        guesses_refused=statuses.count(401), guesses_throttled=statuses.count(429),
        exports_answered_big=exports)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
