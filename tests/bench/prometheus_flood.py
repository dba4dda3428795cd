"""The Prometheus endpoint under a flood of idle connections, and what gzip saves.

The real agent runs on a simulated node with the endpoint on; this process plays both the
scraper and the flood. Figures:

- the scrape: bytes as text 0.0.4 and as gzip-compressed OpenMetrics (what Prometheus asks
  for), and its latency (a fresh connection per scrape, as Prometheus makes after an idle
  timeout) with nothing else connected;
- the flood: ``connections`` sockets connect at once and then send nothing. How fast the
  connects complete (the accept rate a burst of clients sees; a short listen backlog drops
  SYNs and the client retries after 1 s, 3 s, ...), the scrape latency while they are open,
  the agent's thread count while they are open, and its resident memory before the flood and
  after the idle sockets have closed (does the endpoint give the memory back?).

Runs with ``python -m tests.bench --only prometheus-flood``, or on its own (``python -m
tests.bench.prometheus_flood``) to measure any endpoint revision with the same code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.results import PrometheusFloodResult
from tests.integration.harness import AgentProcess
from tests.receivers.netutil import free_port, wait_for_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

OPENMETRICS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                      "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
ACCEPT_DEADLINE_SECONDS = 15.0
SETTLE_SECONDS = 3.0  # after the flood closes, before resident memory is read again


@dataclass(frozen=True)
class PrometheusFloodCase:
    name: str
    scenario: Path
    connections: int
    scrapes: int  # per latency figure


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for process {pid}")


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def _scrape(url: str, headers: dict[str, str]) -> tuple[float, int, str]:
    """Seconds, body bytes on the wire, Content-Type: one scrape on a fresh connection."""
    request = urllib.request.Request(url, headers=headers)
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read()
        content_type = response.headers.get("Content-Type", "")
    return time.perf_counter() - started, len(body), content_type


def _median_ms(url: str, headers: dict[str, str], count: int) -> float:
    return statistics.median(_scrape(url, headers)[0] for _ in range(count)) * 1000


def _open_sockets(pid: int) -> int:
    """Sockets the agent holds open: what it has accepted (the client's connect completes
    earlier, on the SYN-ACK, even when the server's accept queue is full)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            count += fd.readlink().name.startswith("socket:")
    return count


def _connect(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` non-blocking connects at once; nothing is ever sent on them."""
    sockets = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(address)
        sockets.append(sock)
    return sockets


@dataclass(frozen=True)
class Held:
    times: list[float]  # seconds after the connects until the agent held 1, 2, ... at once
    max_threads: int


def _watch_accepts(pid: int, base: int, count: int, started: float,
                   deadline_s: float) -> Held:
    """Poll /proc until the agent holds ``count`` more sockets than ``base``, or the deadline."""
    held: list[float] = []
    threads = 0
    while len(held) < count and time.perf_counter() - started < deadline_s:
        now = time.perf_counter() - started
        held.extend(now for _ in range(_open_sockets(pid) - base - len(held)))
        threads = max(threads, _threads(pid))
        time.sleep(0.002)
    return Held(held, threads)


@dataclass(frozen=True)
class Flood:
    held: Held
    scrape_ms: float  # median, scraped while the idle sockets were being accepted and open
    rss_mib: float  # while open


def _one_flood(address: tuple[str, int], pid: int, connections: int, *, metrics: str,
               headers: dict[str, str], scrapes: int) -> Flood:
    """Open the idle sockets, scrape meanwhile, close them, let the agent settle."""
    base = _open_sockets(pid)
    started = time.perf_counter()
    flood = _connect(address, connections)
    latencies: list[float] = []
    scraper = threading.Thread(
        target=lambda: latencies.extend(_scrape(metrics, headers)[0] for _ in range(scrapes)))
    try:
        scraper.start()
        held = _watch_accepts(pid, base, connections, started, ACCEPT_DEADLINE_SECONDS)
        scraper.join()
        rss = _rss_mib(pid)
    finally:
        for sock in flood:
            sock.close()
    time.sleep(SETTLE_SECONDS)
    median = statistics.median(latencies) * 1000 if latencies else float("nan")
    return Flood(held, median, rss)


def measure(url: str, pid: int, connections: int, scrapes: int) -> dict[str, float | int]:
    metrics = url + "/metrics"
    _scrape(metrics, {})  # warm: the first scrape builds caches
    _, plain_bytes, _ = _scrape(metrics, {})
    om_headers = {"Accept": OPENMETRICS_ACCEPT, "Accept-Encoding": "gzip"}
    _, gzip_bytes, om_type = _scrape(metrics, om_headers)
    idle_ms = _median_ms(metrics, om_headers, scrapes)
    threads_before = _threads(pid)
    rss_before = _rss_mib(pid)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    first = _one_flood((host, int(port)), pid, connections, metrics=metrics,
                       headers=om_headers, scrapes=scrapes)
    rss_after_first = _rss_mib(pid)
    _one_flood((host, int(port)), pid, connections, metrics=metrics,
                       headers=om_headers, scrapes=scrapes)
    connected = first.held.times
    nan = float("nan")
    last = connected[connections - 1] if len(connected) >= connections else nan
    return {
        "plain_bytes": plain_bytes,
        "gzip_openmetrics_bytes": gzip_bytes,
        "openmetrics_served": int(om_type.startswith("application/openmetrics-text")),
        "scrape_ms_idle": idle_ms,
        "scrape_ms_flood": first.scrape_ms,
        "held_max": len(connected),
        "all_held_s": last,
        "accepts_per_s": connections / last if last > 0 else nan,
        "eighth_held_s": connected[7] if len(connected) > 7 else nan,
        "threads_before": threads_before,
        "threads_flood": first.held.max_threads,
        "threads_after": _threads(pid),
        "rss_before_mib": rss_before,
        "rss_flood_mib": first.rss_mib,
        "rss_after_mib": rss_after_first,
        "rss_after_second_mib": _rss_mib(pid),
    }


def run_prometheus_flood_case(case: PrometheusFloodCase, workdir: Path) -> PrometheusFloodResult:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = workdir / "agent.yaml"
    config.write_text(yaml.safe_dump({
        "prometheus": {"enabled": True, "listen": f"127.0.0.1:{port}"}}), encoding="utf-8")
    with SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node, \
            OtlpGrpcReceiver() as receiver:
        agent = AgentProcess(workdir, receiver.endpoint, node.env,
                             ["--interval", "1", "--export-interval", "30", "--config",
                              str(config), "--log-level", "warning"])
        try:
            if not wait_for_port("127.0.0.1", port, 60,
                                 alive=lambda: agent.process.poll() is None):
                raise RuntimeError(f"agent endpoint never came up:\n{agent.log()[-3000:]}")
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url + "/readyz")
            figures = measure(url, agent.process.pid, case.connections, case.scrapes)
        finally:
            agent.close()
    return PrometheusFloodResult(
        case=case.name, scenario=case.scenario.name,
        gpus=len(load_scenario(case.scenario).devices), connections=case.connections,
        scrapes=case.scrapes,
        plain_bytes=int(figures["plain_bytes"]),
        gzip_openmetrics_bytes=int(figures["gzip_openmetrics_bytes"]),
        openmetrics_served=bool(figures["openmetrics_served"]),
        scrape_ms_idle=round(float(figures["scrape_ms_idle"]), 2),
        scrape_ms_flood=round(float(figures["scrape_ms_flood"]), 2),
        held_max=int(figures["held_max"]),
        accepts_per_s=round(float(figures["accepts_per_s"]), 1),
        all_held_s=round(float(figures["all_held_s"]), 3),
        eighth_held_s=round(float(figures["eighth_held_s"]), 3),
        threads_before=int(figures["threads_before"]),
        threads_flood=int(figures["threads_flood"]),
        threads_after=int(figures["threads_after"]),
        rss_before_mib=round(float(figures["rss_before_mib"]), 1),
        rss_flood_mib=round(float(figures["rss_flood_mib"]), 1),
        rss_after_mib=round(float(figures["rss_after_mib"]), 1),
        rss_after_second_mib=round(float(figures["rss_after_second_mib"]), 1),
    )


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} never answered 200")


def main() -> int:
    from tests.bench.plan import NODE_16

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    case = PrometheusFloodCase("prometheus-flood", NODE_16, args.connections, args.scrapes)
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        result = run_prometheus_flood_case(case, Path(tmp))
    json.dump(asdict(result), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
