"""Fleet sizing from a benchmark run: what a collector gateway tier and Mimir must ingest for
100, 1 000 and 10 000 nodes, computed from the per-node figures the agent cases measured.

Nothing here is estimated from outside the run: series, points and bytes per export are what
the local OTLP receiver got from the agent (last export of the main window), the storm's event
records are the storm case's. The arithmetic is multiplication by the fleet size and division
by the export interval; the assumptions that arithmetic rests on are listed with the tables.
"""

from __future__ import annotations

from tests.bench.agent_case import DEFAULT_EXPORT_INTERVAL_S
from tests.bench.markdown import table as _table
from tests.bench.results import AgentResult, Report

FLEETS = (100, 1_000, 10_000)
SHAPES = ("agent-8gpu-1s", "agent-16gpu-1s", "agent-8gpu-mig7-1s", "agent-8amd-1s")


def _fmt(value: float) -> str:
    for size, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if value >= size:
            return f"{value / size:,.1f}{unit}"
    return f"{value:,.0f}"


def _bytes(value: float) -> str:
    for size, unit in ((1 << 30, " GiB"), (1 << 20, " MiB"), (1 << 10, " KiB")):
        if value >= size:
            return f"{value / size:,.1f}{unit}"
    return f"{value:,.0f} B"


def _shapes(report: Report) -> list[AgentResult]:
    by_name = {a.case: a for a in report.agent}
    return [by_name[name] for name in SHAPES if name in by_name]


def _per_node(shapes: list[AgentResult]) -> list[str]:
    rows = []
    for a in shapes:
        f = a.points_by_family
        rows.append([
            f"{a.case} ({a.scenario})", f"{a.gpus} / {a.gpu_processes}",
            f"{a.points_per_export:,}",
            f"{f.get('device', 0):,} / {f.get('per-process', 0):,} / "
            f"{f.get('per-container', 0):,} / {f.get('self-telemetry', 0):,}",
            f"{int(a.payload_bytes_mean):,} / {a.payload_gzip_bytes:,}",
            f"{a.points_per_export / DEFAULT_EXPORT_INTERVAL_S:,.1f}",
        ])
    return _table(["node shape (bench case)", "GPUs / GPU processes",
                   "series per node (= points per export)",
                   "of which device / per-process / per-container / self-telemetry",
                   "bytes per export: protobuf / gzip'd",
                   f"points / s at the default {DEFAULT_EXPORT_INTERVAL_S:g} s export"], rows)


def _fleet(shapes: list[AgentResult]) -> list[str]:
    rows = []
    e = DEFAULT_EXPORT_INTERVAL_S
    for a in shapes:
        per_process = a.points_by_family.get("per-process", 0)
        for nodes in FLEETS:
            rows.append([
                a.case, f"{nodes:,}",
                _fmt(nodes * a.points_per_export),
                _fmt(nodes * (a.points_per_export - per_process)),
                _fmt(nodes * a.points_per_export / e),
                f"{_fmt(nodes / e)} requests, {_bytes(nodes * a.payload_gzip_bytes / e)}/s gzip'd "
                f"({_bytes(nodes * a.payload_bytes_mean / e)}/s to decode)",
            ])
    return _table(["node shape", "nodes", "active series (Mimir)",
                   "… per-process series dropped at the gateway",
                   "samples / s into Mimir", "gateway ingress per second"], rows)


def _storm(report: Report) -> list[str]:
    lines = []
    for s in report.storm:
        per_node = s.log_records / max(s.accounted_s, 1e-9)
        lines.append(
            f"- Health events under a storm ({s.case}): {s.xids:,} XIDs on one GPU in "
            f"{s.xids / max(s.inject_per_s, 1e-9):.2f} s became {s.log_records} log records "
            f"over {s.accounted_s:.2f} s (the first at once, repeats folded into one summary per "
            f"{s.storm_window_s:g} s storm window): about {per_node:.1f} records/s from a "
            f"storming node. Were every node of a fleet storming at once: "
            + ", ".join(f"{nodes:,} nodes → {_fmt(nodes * per_node)} records/s"
                        for nodes in FLEETS)
            + " into the gateway's logs pipeline (and Loki); at rest, none.")
    return lines


def markdown(report: Report) -> str:
    shapes = _shapes(report)
    if not shapes:
        return "No agent case ran: no sizing.\n"
    kind = "smoke run (figures only prove the suite works)" if report.smoke else "full run"
    lines = [
        f"Computed from the benchmark run of {report.started} ({kind}); regenerated with the "
        "benchmark tables (`python -m tests.bench --update-readme`).",
        "",
        "Per node, measured (the last export of each agent case's main window, at the local "
        "OTLP receiver):",
        "",
        *_per_node(shapes),
        "",
        f"Per fleet, at the default export interval ({DEFAULT_EXPORT_INTERVAL_S:g} s):",
        "",
        *_fleet(shapes),
        "",
        *_storm(report),
    ]
    return "\n".join(lines) + "\n"
