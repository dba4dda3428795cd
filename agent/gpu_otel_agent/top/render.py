"""Lays a :class:`~gpu_otel_agent.top.view.Frame` out as lines of styled text.

The same lines are printed plain (``--once``, no terminal) and drawn by the live screen; a style
is a name the screen maps to the terminal's attributes (none under ``NO_COLOR``). Every line is
cut to the width, so 80 columns always fit; at a given height the device table comes first,
then processes and events share what is left.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpu_otel_agent.top.view import Device, Event, Filter, Frame, Process, sort_processes

Segment = tuple[str, str]  # text, style name ("" for none)
Line = list[Segment]
SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 7
HEALTH_STYLE = {"ok": "ok", "degraded": "warn", "failed": "error"}
SEVERITY_STYLE = {"FATAL": "error", "ERROR": "error", "WARN": "warn"}
GIB = 1024 ** 3


@dataclass(frozen=True)
class Options:
    sort: str = "memory"
    filter: Filter = field(default_factory=Filter)
    paused: bool = False
    status: str = ""  # a message for the last line (a bad filter, a lost connection)
    prompt: str | None = None  # the filter being typed


def spark(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """The last ``width`` values (0..1) as block characters."""
    tail = list(values)[-width:]
    return "".join(SPARKS[min(int(max(v, 0.0) * len(SPARKS)), len(SPARKS) - 1)] for v in tail)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _num(value: float | None, unit: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value / scale:.0f}{unit}"


def _memory(used: int | None, total: int | None) -> str:
    if used is None or total is None:
        return "-"
    return f"{used / GIB:.1f}/{total / GIB:.0f}G"


MODEL_WIDTH = 14
# A GPU's label on a node with GPUs of two vendors (each counts from 0): N0, A0.
VENDOR_MARKS = {"nvidia": "N", "amd": "A"}


def gpu_label(vendor: str, index: int, mixed: bool) -> str:
    if not mixed:
        return str(index)
    return f"{VENDOR_MARKS.get(vendor, vendor[:1].upper())}{index}"


def _short_model(model: str) -> str:
    """The model without its vendor (named by the label, the rest of the row): AMD's Instinct
    line by its part name (MI300X), as people say it; an ellipsis marks a cut, so a cut name is
    never read as another part ("Instinct MI300" for an MI300X)."""
    for vendor in ("NVIDIA ", "AMD Instinct ", "AMD "):
        model = model.removeprefix(vendor)
    return model if len(model) <= MODEL_WIDTH else model[:MODEL_WIDTH - 1] + "…"


def _fit(line: Line, width: int) -> Line:
    """Cut to ``width`` characters (an ellipsis marks the cut)."""
    out: Line = []
    room = width
    for text, style in line:
        if room <= 0:
            break
        cut = text if len(text) <= room else (text[:room - 1] + "…" if room > 1 else text[:1])
        out.append((cut, style))
        room -= len(cut)
    return out


DEVICE_HEADER = (f"{'GPU':>3} {'MODEL':<14} {'UTIL':>4} {'UTIL60s':<7} {'MEMORY':>10} "
                 f"{'MEM60s':<7} {'TEMP':>4} {'POWER':>5} {'SMMHz':>5} HEALTH")
PROCESS_HEADER = (f"{'GPU':>3} {'PID':>7} {'COMMAND':<12} {'GPU MEM':>7} {'UTIL':>4} "
                  f"{'NAMESPACE':<12} POD / JOB")


def device_line(d: Device, history: tuple[tuple[float, ...], tuple[float, ...]],
                mixed: bool = False) -> Line:
    name = f"{gpu_label(d.vendor, d.index, mixed):>3} {_short_model(d.model):<14}"
    if d.profile is not None:
        name = f"{'':>3}  └ {d.profile:<11.11}"
    util, mem = history
    text = (f"{name} {_pct(d.utilization):>4} {spark(util):<7} "
            f"{_memory(d.memory_used, d.memory_total):>10} {spark(mem):<7} "
            f"{_num(d.temperature, 'C'):>4} {_num(d.power, 'W'):>5} "
            f"{_num(d.sm_clock, '', 1e6):>5} ")
    health = d.health + (f" {d.xid_errors} xid" if d.xid_errors else "")
    return [(text, ""), (health, HEALTH_STYLE.get(d.health, ""))]


def process_line(p: Process, mixed: bool = False) -> Line:
    memory = "-" if p.memory is None else f"{p.memory / 2**20:.0f}M"
    label = gpu_label(p.vendor, p.gpu, mixed)
    line: Line = [(f"{label:>3} {p.pid:>7} {p.executable:<12.12} {memory:>7} "
                   f"{_pct(p.utilization):>4} {p.namespace or '-':<12.12} ", ""),
                  (p.workload, "bold")]
    if p.profile is not None:  # on a partition: which one (MIG 3g.40gb, CPX)
        line.append((f" on {p.profile}", "dim"))
    return line


def event_lines(e: Event, width: int, mixed: bool = False) -> list[Line]:
    """One line, or two when the workloads hit do not fit after the summary (they matter
    most: they go on their own line, under the summary)."""
    when = time.strftime("%H:%M:%S", time.localtime(e.time_ns / 1e9))
    where = f"GPU {gpu_label(e.vendor, e.gpu, mixed)}" if e.gpu is not None else "node"
    hit = e.pods or e.processes
    line: Line = [(f"{when} ", "dim"), (f"{where:<6} ", ""),
                  (e.summary, SEVERITY_STYLE.get(e.severity, ""))]
    if not hit:
        return [line]
    pods: Segment = (" hit: " + ", ".join(hit), "bold")
    if sum(len(text) for text, _ in line) + len(pods[0]) <= width:
        return [[*line, pods]]
    return [line, [(" " * 15, ""), (pods[0].lstrip(), "bold")]]


def _title(frame: Frame, options: Options) -> Line:
    when = time.strftime("%H:%M:%S", time.localtime(frame.taken_ns / 1e9))
    line: Line = [("gpu-agent top", "title"), (f" {when} ", "")]
    if options.paused:
        line.append(("PAUSED ", "warn"))
    line.append((f"· {frame.source}", ""))
    return line


def _footer(options: Options) -> Line:
    if options.prompt is not None:
        return [("filter (pod:NAME ns:NAME gpu:N word; Enter applies, Esc clears): ", "bold"),
                (options.prompt, "")]
    line: Line = [("q", "bold"), (" quit  ", ""), ("s", "bold"), (f" sort:{options.sort}  ", ""),
                  ("/", "bold"), (f" filter:{str(options.filter) or 'none'}  ", ""), ("p", "bold"),
                  (" pause  ", "")]
    if options.status:
        line.append((options.status, "warn"))
    return line


def _rows(groups: list[list[Line]], limit: int | None, what: str) -> list[Line]:
    """Whole groups (an event and its second line) while they fit, then how many are left."""
    lines = [line for group in groups for line in group]
    if limit is None or len(lines) <= limit:
        return lines
    out: list[Line] = []
    for shown, group in enumerate(groups):
        if len(out) + len(group) > limit - 1:
            if not out:  # not even one whole group: its first lines
                return group[:limit]
            return [*out, [(f"  … {len(groups) - shown} more {what}", "dim")]]
        out.extend(group)
    return out


def _share(rows: int, processes: int, events: int) -> tuple[int, int]:
    """Rows for processes and for events: half each, what one does not need to the other."""
    if processes + events <= rows:
        return processes, events
    half = math.ceil(rows / 2)
    if events < rows - half:
        return rows - events, events
    if processes < half:
        return processes, rows - processes
    return half, rows - half


def render(frame: Frame, options: Options, width: int, height: int | None = None) -> list[Line]:
    """The screen as lines; ``height`` None: everything (a plain snapshot)."""
    flt = options.filter
    mixed = frame.mixed
    # Each vendor's GPUs together (stable: partitions stay under their GPU).
    shown = sorted((d for d in frame.devices if flt.device(d)),
                   key=lambda d: d.vendor if mixed else "")
    processes = [[process_line(p, mixed)] for p in
                 sort_processes([p for p in frame.processes if flt.process(p)], options.sort)]
    if not processes:
        processes = [[[("  no processes" + (" match the filter" if flt.workload else ""),
                        "dim")]]]
    events = [event_lines(e, width, mixed) for e in reversed(frame.events) if flt.event(e)]
    if not events:
        events = [[[("  no health events yet", "dim")]]]
    proc_limit = event_limit = device_limit = None
    hidden = 0
    if height is not None:
        fixed = 5  # title, three headers, footer
        device_limit = max(height - fixed - 6, 1)  # at least 6 rows of processes and events
        if len(shown) > device_limit:  # partitions first: `gpu:N` shows a GPU's again
            hidden = sum(d.parent is not None for d in shown)
            shown = [d for d in shown if d.parent is None]
        left = max(height - fixed - min(len(shown) + bool(hidden), device_limit), 0)
        proc_limit, event_limit = _share(left, len(processes),
                                         sum(len(group) for group in events))
    devices = [[device_line(d, frame.history.get(d.uuid, ((), ())), mixed)] for d in shown]
    if hidden:
        devices.append([[(f"  {hidden} partitions not shown (filter gpu:N shows a GPU's)",
                          "dim")]])
    title = _title(frame, options)
    out: list[Line] = [
        title,
        [(DEVICE_HEADER, "header")],
        *_rows(devices, device_limit, "GPUs (filter gpu:N)"),
        [(PROCESS_HEADER, "header")],
        *_rows(processes, proc_limit, "processes (filter pod:NAME)"),
        [("HEALTH EVENTS (newest first)", "header")],
        *_rows(events, event_limit, "events"),
    ]
    if height is not None:
        out.extend([("", "")] for _ in range(height - len(out) - 1))
        out.append(_footer(options))  # on the last row
    return [_fit(line, width) for line in out]


def plain(lines: list[Line]) -> str:
    return "".join("".join(text for text, _ in line).rstrip() + "\n" for line in lines)
