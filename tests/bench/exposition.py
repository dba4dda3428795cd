"""Scrape time and size at 16 GPUs x 256 processes: the exposition as ``prometheus_client``
writes it against the hand-written writers it replaced, on the same snapshot.

``python -m tests.bench.exposition [--scenario FILE] [--repeats N] [--baseline REV]`` starts the
simulated node, reads it in a child process through the real NVIDIA backend
(``encoding.read_node``), and for each naming scheme (``otel``, ``dcgm``) and format (text
0.0.4, OpenMetrics 1.0.0) times the whole page: snapshot -> series -> families (the part both
share) -> bytes, then gzip at the endpoint's level. The old writers are loaded from git at
``--baseline`` (the commit before the switch), so both run in one process, interleaved, on the
very same families; each old page is checked to hold the same samples as the new one (parsed
by prometheus_client's parsers) before any figure is printed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Mapping
from pathlib import Path

from gpu_otel_agent.simulation.node import SimulatedNode

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples/scenarios/bench-16gpu-256proc.yaml"
BASELINE = "cce4720"  # main before issue 33.5: exposition.py/openmetrics.py written by hand
_PACKAGE = "agent/gpu_otel_agent/export/prometheus"
_NEW_EXPOSITION = "gpu_otel_agent.export.prometheus.exposition"


def _old_module(name: str, path: str, revision: str, replace: tuple[str, str] = ("", "")) -> \
        types.ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{path}"],
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    exec(compile(source.replace(*replace), path, "exec"), module.__dict__)
    return module


def _old_writers(revision: str) -> dict[str, Callable[[object], bytes]]:
    text = _old_module("baseline_exposition", f"{_PACKAGE}/exposition.py", revision)
    openmetrics = _old_module("baseline_openmetrics", f"{_PACKAGE}/openmetrics.py", revision,
                              (_NEW_EXPOSITION, "baseline_exposition"))
    return {"text": text.render, "openmetrics": openmetrics.render_openmetrics}


def _samples(body: bytes, format_: str) -> set[tuple[str, frozenset[tuple[str, str]], float]]:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
    from prometheus_client.parser import text_string_to_metric_families as text

    page = body.decode()
    parse = om if format_ == "openmetrics" else text
    # The text parser names a counter's sample X_total even where the page says X (as the old
    # writer's dcgm counters did); Prometheus stores the name the page says.
    written = {line.split("{")[0].split(" ")[0] for line in page.splitlines()
               if line and not line.startswith("#")}
    return {(s.name if s.name in written else s.name.removesuffix("_total"),
             frozenset(s.labels.items()), s.value)
            for family in parse(page) for s in family.samples}


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def _measure(node_env: Mapping[str, str], repeats: int, baseline: str) -> dict[str, object]:
    from tests.bench.encoding import read_node

    read = read_node(node_env)

    from gpu_otel_agent.export.metrics.series import series
    from gpu_otel_agent.export.prometheus.dcgm_scheme import DcgmTranslator
    from gpu_otel_agent.export.prometheus.exposition import Families, render
    from gpu_otel_agent.export.prometheus.openmetrics import render_openmetrics
    from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
    from gpu_otel_agent.export.prometheus.server import GZIP_LEVEL

    resource = dict(read.resource.attributes)
    dcgm = DcgmTranslator(resource)
    build: dict[str, Callable[[], Families]] = {
        "otel": lambda: otel_families(series(read.snapshot), resource),
        "dcgm": lambda: dcgm.families(series(read.snapshot)),
    }
    new: dict[str, Callable[[Families], bytes]] = {"text": render,
                                                   "openmetrics": render_openmetrics}
    old = _old_writers(baseline)
    figures: dict[str, object] = {"gpus": len(read.snapshot.devices), "repeats": repeats}
    for scheme, families_of in build.items():
        for format_ in ("text", "openmetrics"):
            times: dict[str, list[float]] = {k: [] for k in (
                "families", "old", "new", "old_gzip", "new_gzip")}
            bodies: dict[str, bytes] = {}
            for _ in range(repeats):
                started = time.perf_counter()
                families = families_of()
                times["families"].append(_ms(started))
                for which, write in (("old", old[format_]), ("new", new[format_])):
                    started = time.perf_counter()
                    bodies[which] = write(families)
                    times[which].append(_ms(started))
                    started = time.perf_counter()
                    zipped = gzip.compress(bodies[which], GZIP_LEVEL, mtime=0)
                    times[f"{which}_gzip"].append(_ms(started))
                    bodies[f"{which}_gzip"] = zipped
            old_samples, new_samples = (_samples(bodies[w], format_) for w in ("old", "new"))
            assert old_samples == new_samples, f"{scheme} {format_}: the pages differ"
            median = {k: statistics.median(v) for k, v in times.items()}
            figures[f"{scheme}/{format_}"] = {
                "samples": len(new_samples),
                "families_ms": round(median["families"], 2),
                **{f"{w}_render_ms": round(median[w], 2) for w in ("old", "new")},
                **{f"{w}_scrape_ms": round(median["families"] + median[w], 2)
                   for w in ("old", "new")},
                **{f"{w}_gzip_ms": round(median[f"{w}_gzip"], 2) for w in ("old", "new")},
                **{f"{w}_bytes": len(bodies[w]) for w in ("old", "new")},
                **{f"{w}_gzip_bytes": len(bodies[f"{w}_gzip"]) for w in ("old", "new")},
            }
    read.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--baseline", default=BASELINE,
                        help="git revision holding the hand-written writers")
    parser.add_argument("--child", metavar="NODE_ENV", help=argparse.SUPPRESS)
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/gpu-agent-bench-expo"))
    args = parser.parse_args()
    if args.child:
        json.dump(_measure(json.loads(args.child), args.repeats, args.baseline), sys.stdout)
        return 0
    with SimulatedNode.start(args.scenario, state_dir=args.state_dir) as node:
        child = subprocess.run(
            [sys.executable, "-m", "tests.bench.exposition", "--child", json.dumps(
                dict(node.env)), "--repeats", str(args.repeats), "--baseline", args.baseline],
            capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    if child.returncode:
        print(child.stderr[-3000:], file=sys.stderr)
        return 1
    print(json.dumps(json.loads(child.stdout), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
