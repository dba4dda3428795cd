"""report.json (every figure, as measured) and report.md (the tables, with targets beside them)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

from tests.bench import sizing
from tests.bench.markdown import table as _table
from tests.bench.results import AgentResult, EbpfLoadRun, Report

COMMAND = ".venv/bin/python -m tests.bench --update-readme"
EBPF_COMMAND = f"{COMMAND} --only ebpf-call-cost,ebpf-call-cost-endbr64,ebpf-100k"
USAGE = (
    "Run `.venv/bin/python -m tests.bench` (`--smoke` for a short run, `--output DIR`, default\n"
    "`bench-results/`; `--update-readme` puts the tables here). The simulated node stands in\n"
    "for the GPUs, so NVML calls are counted exactly and every client sees the same node."
)

NOTES = (
    "agent-8gpu-defaults runs the agent with no interval flag at all: the fast and processes "
    "groups every 5 s, gpm every 10 s, slow every 30 s, an export every 10 s (what a node "
    "pays when nobody tunes anything; its per-cycle figures are per 5 s fast cycle). "
    "agent-8gpu-10s samples the fast group every 10 s and exports every 10 s, to set beside "
    "nvitop-exporter scraped every 10 s.",
    "Devices due at the same moment read in turn on one thread (`threads.relay`, "
    "`threads.courier`): the loop hands the round to the relay's courier, which runs each "
    "device's jobs after the other's, and the results reach the loop together; the export "
    "due on that tick goes right after them. All at once, eight or sixteen threads fought "
    "for the GIL on every NVML call (ctypes drops it): about six context switches per job, "
    "more CPU than the reads; handed from device thread to device thread, each woke once a "
    "round. A device stuck in its turn holds the others back 50 ms at most.",
    "The agent lists GPU processes in its own `processes` group (default every 5 s, whatever "
    "the fast interval), while nvitop-exporter and gpustat list every GPU process (64 here) "
    "on every update: their calls and CPU include that work at the faster rate.",
    "Attribution cost: the same 50 GPU processes (in kubepods cgroups) are attributed with 50 "
    "and with thousands of idle host processes; only GPU PIDs are ever looked up (once: the "
    "/proc reads after warm-up column), so the cost per cycle must not follow the host's "
    "process count. The whole-process column also holds the netlink/inotify handling.",
    "Event latency runs from just before the XID is pushed into the simulated node's event "
    "ring (the daemon's `queued_unix_ns`) to the OTLP receiver's handler, on the same clock; "
    "the column from the control command starts before the benchmark sends the `xid` "
    "command instead, so it adds that command's round trip through the node's daemon (runs "
    "before 2026-11-27 reported that figure as the latency); each XID waits for the previous "
    "one, on a different (GPU, code), so no queue or storm window is in the figure. The "
    "health events' waiting threads (nvmlEventSetWait_v2, 5 s timeout) are left out of "
    "the NVML call counts above: a wait is not a reading.",
    "Where a cycle's CPU goes: the agent's own clocks (`threads.costs`), read with SIGUSR1 at "
    "both ends of the main window and divided by the fast cycles it spans. Each stage is the "
    "thread CPU time (`time.thread_time`) of the code named, less the stages opened inside it; "
    "a thread's row without a stage is what that thread spent outside every stage (waking up, "
    "queue and future hand-offs, the event loop's own work). Threads are read from the "
    "scheduler (/proc/self/task/*/schedstat), so the whole-agent figure can differ slightly "
    "from the utime + stime of the table above; the last thread row is the process less its "
    "Python threads (native threads; none since OTLP/gRPC is sent by the agent's own h2 "
    "client instead of grpcio, whose core kept a pool of threads awake).",
    "NVML calls per GPU per fast cycle stay at 4, each for a reading nvml.h offers no field "
    "id for, so none can join the nvmlDeviceGetFieldValues batch (which carries GPU and "
    "memory temperature, NVML_FI_DEV_POWER_INSTANT, total energy and the PCIe byte counters "
    "in one call): nvmlDeviceGetUtilizationRates (GPU and memory busy %: no NVML_FI_ field), "
    "nvmlDeviceGetMemoryInfo_v2 (used, reserved and total frame buffer: no field; the v2 "
    "struct is the only source of `reserved`) and nvmlDeviceGetClockInfo(NVML_CLOCK_SM) (the "
    "current SM clock: nvml.h's clock fields are throttle-reason counters and limits, not "
    "the clock). The simulated NVML is compiled against the real nvml.h (nvidia-nvml-dev) and "
    "answers those field ids in the units it documents (NVML_FI_DEV_POWER_INSTANT in mW, "
    "energy in mJ, temperatures in °C, PCIe bytes as wrapping counters), so the batch is "
    "exercised as on a driver.",
    "Host churn: the agent as in agent-8gpu-1s, with attribution on (netlink proc connector) "
    "or off; its CPU (scheduler time of its threads) over a quiet window, then over a window "
    "of the same length while a generator (`tests.bench.churn`) posix_spawns `true` at 500 a "
    "second. The agent's GPU processes neither exec nor exit meanwhile, so every event is for "
    "a process it does not hold: the kernel-side PID filter (a socket filter on the proc "
    "connector, or the eBPF plugin's watched_pids map) drops them before they reach it.",
    "XID storm: one XID (13, which leaves the GPU healthy) pipelined as fast as the simulated "
    "node's control socket takes it onto one GPU; the first occurrence goes out at once, "
    "repeats are folded into one summary per storm window (`gpu.event.count`). The storm "
    "ends when the receiver holds the `gpu.xid.errors` counter at the number injected and "
    "records that add up to it (arrival times); the summary is due when the window ends, so "
    "that time is mostly the window itself. Agent CPU per 1000 XIDs is its CPU over that "
    "span less its rate at rest just before. The other GPUs' largest gap is between distinct "
    "sample times at the receiver (an export that carries no new sample widens it too); "
    "missed cycles are the agent's own `gpu_agent.cycles.missed` over the storm.",
    "agent-8gpu-mig7-1s is agent-8gpu-1s with MIG on: each H100 split into seven 1g.10gb "
    "instances (56 MIG devices, bench-8gpu-mig7-64proc.yaml), the same 64 processes spread over "
    "them. Calls per GPU include the instances' (MIG handles count under their GPU): per "
    "instance, memory (1 call) and GPM (nvmlGpmSampleGet on its handle + nvmlGpmMetricsGet) "
    "per cycle, its SRAM ECC count (1 call) per slow cycle; processes come from the GPU's own "
    "lists, split by gpuInstanceId and computeInstanceId (no call per instance); the partition "
    "scan (mode, count, a handle per MIG device index up to the maximum count, UUID per "
    "instance) runs on the slow cadence.",
    "agent-8gpu-2048proc-1s is agent-8gpu-1s with 2,048 GPU processes, 256 per GPU "
    "(bench-8gpu-2048proc.yaml; issue 41's \"8 x 2,048\"), each with a utilization sample "
    "every cycle: what a process costs. Above 1,984 watched PIDs the kernel's socket filter "
    "no longer fits (BPF_MAXINSNS), so the agent decodes every process event of the host.",
    "agent-8amd-1s is agent-8gpu-1s with eight AMD MI300X (bench-8mi300x-64proc.yaml) read "
    "through the real amdsmi package from the simulated libamd_smi.so: amdsmi calls instead of "
    "NVML calls (the firmware metrics table, VRAM usage and the energy counter in the fast "
    "group); amdsmi's event-notification wait is left out like NVML's.",
    "NVML calls are counted by the simulated node for all clients together; each client runs "
    "alone on its own node. Windows start and end just after a burst of calls, so they hold an "
    "exact number of cycles.",
    "Fast-group calls are measured in a second window of the same agent after the slow and gpm "
    "groups are switched off by a configuration reload: nvmlDeviceGetFieldValues and "
    "nvmlDeviceGetClockInfo serve both the fast and the slow group.",
    "CPU is utime + stime of the measured process only (the simulated node runs in its own "
    "process); gpustat's figure covers its whole short-lived process (wait4 rusage). Peak RSS "
    "is VmHWM (start-up included); gpustat's is its ru_maxrss, launched from a small helper "
    "because Linux carries a forking parent's resident size into the child's ru_maxrss.",
    "The encoding estimate multiplies the encode case's time per export (same GPU count) by "
    "the exports per minute: the share of the agent's CPU that is snapshot -> OTLP bytes.",
    "nvitop-exporter updates on its own loop every interval and is scraped over HTTP at the "
    "same interval; gpustat is compared as if run once per sampling interval.",
    "Encode time is measured on a real snapshot: the agent's NvidiaBackend reads every group of "
    "every GPU of the simulated node in a child process, then the agent's ProtoEncoder + "
    "SerializeToString is timed, and the SDK path (MetricsData + encode_metrics) beside it; "
    "both produce the same bytes (checked). Payload size per export "
    "is the serialised ExportMetricsServiceRequest as received by the local OTLP receiver.",
    "nvml-chaos: the 16-GPU node answers a share of NVML calls (the rate) with an error drawn "
    "from that call's `@return` codes in nvml.h (seeded; per-field codes for "
    "nvmlDeviceGetFieldValues). Injected errors come from the node's stats; counted ones are "
    "the agent's `gpu_agent.library.errors` at the receiver (every injected error must arrive "
    "there). Samples exported are distinct hw.power sample times per GPU at the receiver over "
    "the window, against GPUs x cycles (a failed read leaves the value absent). Calls per cycle "
    "before and under chaos show whether errors multiply NVML traffic; RSS is VmRSS through the "
    "window.",
    "soak: the agent samples the 8-GPU node every 0.25 s while a real short-lived process "
    "(`sleep`, a 2 s life) is registered as a GPU process every second and removed from the "
    "node once it has exited; RSS is the agent's VmRSS through the run (the receiver's store "
    "is cleared as it goes: only the agent is measured). A structure keeping something per "
    "process that came and went shows as growth after the first quarter.",
    "fault-soak: the agent on the 8-GPU node sends to a grpcio OTLP receiver the case drives: "
    "at random (seeded, mean gap 20 s) the agent is killed with SIGKILL and started on the same "
    "spool, the receiver stops for 8 s, or it answers RESOURCE_EXHAUSTED with a 2 s RetryInfo "
    "for 5 s; one XID of a code used for nothing else is refused with INVALID_ARGUMENT. Two "
    "XIDs a second go in while the agent is up. Delivered counts accepted gpu.xid records by "
    "distinct log.record.uid (a storm summary by its gpu.event.count); duplicates are accepted "
    "copies of a uid already accepted; quarantined is the spool's dead-letter.jsonl; the "
    "longest wait is from a fault's time to its first accepted copy.",
    "hostile-peers: one agent on the 8-GPU node serves /metrics over TLS with basic auth "
    "(bcrypt) and exports over OTLP/HTTP to a collector answering every request 200 with a "
    "huge body; against it, waves of TCP connections that never send a ClientHello (each wave "
    "held until the agent has closed every one: its handshake deadline, 10 s), then clients "
    "guessing passwords on kept-alive connections while /healthz and a scraper with the right "
    "password (verified once before) take turns. RSS is the agent's VmRSS; latencies are the "
    "client's, new TLS connection included (issue 39).",
    "Write-ahead: every health event is written and fsynced to the spool before its first "
    "send (the latency above includes it); the events case's write-ahead column is the "
    "agent's own timing of that write (write, fsync, rename, directory fsync) per event, one "
    "event per write there; in the storm, write-ahead fsyncs count the whole run's writes "
    "(storm control folds the storm into a few events, and each write takes everything that "
    "arrived meanwhile).",
)


EBPF_NOTES = (
    "ebpf-call-cost: the real agent (ebpf enabled) on the 8-GPU bench node attaches to the "
    "stand-in CUDA workload when the workload is added to the node's GPU processes and "
    "detaches when it is removed; the workload times `spin N` (N cudaLaunchKernel back to "
    "back, each forwarded to cuLaunchKernel: two uprobes per call) untraced and traced in "
    "alternating pairs. Cost per traced call = median over the pairs of (traced - untraced) / "
    "N. The agent's exported `gpu.process.cuda.kernel_launches` of the workload must equal "
    "the traced calls (it counts the nested driver call once).",
    "A uprobe's cost depends on the traced function's first instruction: the kernel emulates "
    "a nop or a push in place and single-steps anything else out of line, such as the "
    "`endbr64` that libraries built for Intel CET (`-fcf-protection`) open with, at the cost "
    "of a second trap (on this machine, a VM, some 16 µs per probe). What a real CUDA "
    "library opens with depends on how it was built, so both stand-in variants are measured; "
    "the stand-in's tiny driver functions would otherwise open with a `lock` instruction, "
    "which the kernel cannot probe at all.",
    "ebpf-100k: the same agent configuration as agent-8gpu-1s (8 GPUs, 1 s sampling and "
    "export), once with the plugin off and once on, while the stand-in workload (registered "
    "as a GPU process in both runs) calls cudaLaunchKernel 100 000 times a second. The "
    "uprobes' cost lands in the traced process (workload CPU); the agent only reads the "
    "counters once per `ebpf.interval`. Agent stop is SIGTERM to exit: detaching uprobes "
    "waits for kernel RCU grace periods.",
)


def write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(dataclasses.asdict(report), indent=2, sort_keys=False) + "\n",
                    encoding="utf-8")


def _fmt(value: float | int | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _check(value: float, target: float) -> str:
    return "meets" if value <= target else "**above**"


def _encode_share(report: Report, agent: AgentResult) -> str:
    """CPU a minute of exports costs in encoding alone, from the encode case of as many GPUs."""
    for e in report.encoding:
        if e.gpus == agent.gpus:
            return _fmt(e.total_ms / 1000 * 60 / agent.interval_s, 3)
    return "—"


# The CPU target of each agent case that has one (issue 17), by key of ``plan.TARGETS``.
CPU_TARGETS = {
    "agent-8gpu-1s": "cpu_percent_one_core_8gpu_1s",
    "agent-16gpu-1s": "cpu_percent_one_core_16gpu_1s",
    "agent-8gpu-defaults": "cpu_percent_one_core_8gpu_defaults",
    "agent-8gpu-2048proc-1s": "cpu_percent_one_core_8gpu_2048proc_1s",
}
# Peak RSS targets of their own (issue 41); every other agent case has ``peak_rss_mib``'s.
RSS_TARGETS = {
    "agent-8gpu-2048proc-1s": "peak_rss_mib_8gpu_2048proc_1s",
}


def _agent_rows(report: Report) -> list[list[str]]:
    t = report.targets
    cases = report.agent

    def row(label: str, target: str, cell: Callable[[AgentResult], str]) -> list[str]:
        return [label, target, *(cell(a) for a in cases)]

    def judged(value: float, target: float) -> str:
        return f"{_fmt(value)} ({_check(value, target)})"

    def cpu_target(a: AgentResult) -> float | None:
        return t.get(CPU_TARGETS.get(a.case, ""))

    def cpu(a: AgentResult) -> str:
        target = cpu_target(a)
        return (judged(a.cpu_percent_one_core, target) if target is not None
                else _fmt(a.cpu_percent_one_core))

    def rss(a: AgentResult) -> str:
        target = t.get(RSS_TARGETS.get(a.case, ""), t["peak_rss_mib"])
        return f"{a.peak_rss_mib:.1f} ({_check(a.peak_rss_mib, target)})"

    def intervals(a: AgentResult) -> str:
        export = a.export_interval_s or a.interval_s
        return (_fmt(a.interval_s, 0) if export == a.interval_s
                else f"{_fmt(a.interval_s, 0)} / {_fmt(export, 0)}")

    return [
        row("GPUs / GPU processes", "", lambda a: f"{a.gpus} / {a.gpu_processes}"),
        row("sampling (fast group) / export interval (s)", "", intervals),
        row("window (s) / fast cycles", "", lambda a: f"{a.window_s:.0f} / {a.cycles}"),
        row("CPU s per minute", "", lambda a: _fmt(a.cpu_s_per_min, 3)),
        row("of which encoding exports (s/min, est.)", "", lambda a: _encode_share(report, a)),
        row("CPU % of one core", "; ".join(
            f"≤ {t[key]:g} % ({case.removeprefix('agent-')})"
            for case, key in CPU_TARGETS.items() if key in t), cpu),
        row("peak RSS (MiB)", "; ".join([f"≤ {t['peak_rss_mib']:g}", *(
            f"≤ {t[key]:g} ({case.removeprefix('agent-')})"
            for case, key in RSS_TARGETS.items() if key in t)]), rss),
        row("NVML / amdsmi calls / GPU / cycle, fast group",
            f"≤ {t['fast_calls_per_gpu_per_cycle']:g}",
            lambda a: judged(a.fast_calls_per_gpu_per_cycle, t["fast_calls_per_gpu_per_cycle"])),
        row("NVML / amdsmi calls / GPU / fast cycle, all groups", "",
            lambda a: _fmt(a.calls_per_gpu_per_cycle)),
        row("first export after start (s)", f"≤ {t['first_export_s']:g}",
            lambda a: judged(a.first_export_s, t["first_export_s"])),
        row("missed cycles (whole run)", "0", lambda a: _fmt(a.missed_cycles)),
        row("deadline overruns / errors", "", lambda a: f"{a.deadline_overruns} / {a.errors}"),
        row("exports / export failures", "", lambda a: f"{a.exports} / {a.export_failures}"),
        row("payload per export (bytes)", "", lambda a: _fmt(int(a.payload_bytes_mean))),
        row("payload per export, gzip'd (bytes)", "", lambda a: _fmt(a.payload_gzip_bytes)),
        row("data points per export", "", lambda a: _fmt(a.points_per_export)),
    ]


# Rows of the per-cycle breakdown: (label, thread the stage runs on, stage key or None for
# what that thread spent outside every stage).
_COST_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("sampling: library calls, readings (device threads)", "gpu", "sampling"),
    ("device threads: job hand-off", "gpu", None),
    ("attribution: process lists → per-process and container readings", "MainThread",
     "attribution"),
    ("snapshot: publishing samples, health observer, node snapshot", "MainThread", "snapshot"),
    ("self-telemetry", "MainThread", "self-telemetry"),
    ("event loop: timers, futures, thread hand-offs, netlink / inotify", "MainThread", None),
    ("series: snapshot → points per metric (export thread)", "otlp-export", "series"),
    ("encoding: points → OTLP bytes", "otlp-export", "encoding"),
    ("sending: the OTLP/gRPC call (h2)", "otlp-export", "sending"),
    ("export thread: hand-off (its LoopWorker) and what no stage counts", "otlp-export", None),
)
_MAIN_THREADS = {thread for _, thread, _ in _COST_ROWS}


def _cost_cells(a: AgentResult) -> list[str]:
    c = a.costs
    if c is None:
        return ["—"] * (len(_COST_ROWS) + 4)
    cells = []
    for _, thread, stage in _COST_ROWS:
        if stage is not None:
            cells.append(_fmt(c.stages_us.get(stage, 0.0), 0))
        else:
            inside = sum(c.stages_us.get(st, 0.0) for _, th, st in _COST_ROWS
                         if th == thread and st is not None)
            cells.append(_fmt(c.threads_us.get(thread, 0.0) - inside, 0))
    python = sum(c.threads_us.values())
    others = python - sum(c.threads_us.get(t, 0.0) for t in _MAIN_THREADS)
    cells += [_fmt(others, 0), _fmt(c.process_us - python, 0), f"**{_fmt(c.process_us, 0)}**",
              _fmt(c.process_us / (a.interval_s * 1e6) * 100, 2)]
    return cells


def _costs(report: Report) -> list[str]:
    labels = [label for label, _, _ in _COST_ROWS] + [
        "health-event threads (NVML / amdsmi event waits, kmsg, event export)",
        "native threads (not Python)", "whole agent", "whole agent, % of one core"]
    columns = [_cost_cells(a) for a in report.agent]
    rows = [[label, *(col[i] for col in columns)] for i, label in enumerate(labels)]
    return _table(["CPU per fast cycle (µs)", *(a.case for a in report.agent)], rows)


def _churn(report: Report) -> list[str]:
    target = report.targets.get("churn_cpu_percent_added_500", 0.5)
    rows = [[c.case, "on" if c.attribution else "off", _fmt(c.execs_per_s, 0),
             f"{c.window_s:.0f}", _fmt(c.cpu_percent_quiet, 2), _fmt(c.cpu_percent_churn, 2),
             f"{_fmt(c.cpu_percent_added, 2)}"
             + (f" ({_check(c.cpu_percent_added, target)})" if c.attribution else ""),
             _fmt(c.us_per_exec, 2), _fmt(c.peak_rss_mib, 1),
             "yes" if c.agent_alive else "**no**"]
            for c in report.churn]
    header = ["churn case", "attribution", "execs / s on the host", "window (s)",
              "agent CPU % quiet", "agent CPU % during churn",
              f"added (target ≤ {target:g} with attribution)", "added CPU per exec (µs)",
              "peak RSS (MiB)", "agent alive"]
    return _table(header, rows)


def _by_function(report: Report) -> list[str]:
    functions = sorted({f for a in report.agent for f in a.fast_calls_by_function})
    rows = [[f"`{f}`", *(_fmt(a.fast_calls_by_function.get(f, 0.0)) for a in report.agent)]
            for f in functions]
    return _table(["fast group: calls / GPU / cycle", *(a.case for a in report.agent)], rows)


def _peers(report: Report) -> list[str]:
    rows: list[list[str]] = []
    for p in report.exporter_peers:
        rows.append([
            f"{p.case} (scraped every {p.interval_s:g} s)", p.compared_with,
            f"{_fmt(p.cpu_s_per_min, 3)} s/min", _fmt(p.ratios["cpu"]),
            _fmt(p.peak_rss_mib, 1), _fmt(p.ratios["rss"]),
            _fmt(p.calls_per_gpu_per_cycle), _fmt(p.ratios["calls"]),
        ])
    for g in report.one_shot_peers:
        rows.append([
            f"{g.case} (`gpustat --json`, {g.invocations} runs, {g.processes_listed} processes)",
            g.compared_with,
            f"{_fmt(g.cpu_s_per_invocation, 3)} s/run", _fmt(g.ratios["cpu"]),
            _fmt(g.peak_rss_mib, 1), _fmt(g.ratios["rss"]),
            _fmt(g.calls_per_gpu_per_invocation), _fmt(g.ratios["calls"]),
        ])
    header = ["peer (8 GPUs, 64 processes)", "vs agent case", "CPU", "CPU ratio",
              "peak RSS (MiB)", "RSS ratio", "NVML calls / GPU / cycle or run", "calls ratio"]
    return _table(header, rows)


def _encoding(report: Report) -> list[str]:
    rows = [[e.case, f"{e.gpus}", _fmt(e.points), _fmt(e.total_ms, 3),
             _fmt(e.sdk_encode_ms, 3), _fmt(e.payload_bytes)]
            for e in report.encoding]
    header = ["encode case", "GPUs", "points", "agent: snapshot → OTLP bytes (ms)",
              "SDK path, for comparison (ms)", "payload (bytes)"]
    return _table(header, rows)


def _prometheus(report: Report) -> list[str]:
    rows = [[p.case, f"{p.gpus}", _fmt(p.plain_bytes), _fmt(p.gzip_openmetrics_bytes),
             _fmt(p.scrape_ms_idle, 1), _fmt(p.scrape_ms_flood, 1),
             f"{_fmt(min(p.held_max, p.connections))} / {_fmt(p.connections)}",
             _fmt(p.all_held_s, 3), _fmt(p.eighth_held_s, 3),
             f"{p.threads_before} / {p.threads_flood} / {p.threads_after}",
             f"{_fmt(p.rss_before_mib, 1)} / {_fmt(p.rss_flood_mib, 1)} / "
             f"{_fmt(p.rss_after_mib, 1)} / {_fmt(p.rss_after_second_mib, 1)}"]
            for p in report.prometheus]
    header = ["endpoint case", "GPUs", "text 0.0.4 (bytes)", "OpenMetrics + gzip (bytes)",
              "scrape (ms, median)", "scrape during the flood (ms)",
              "idle sockets held at once", "all held after (s)", "8th held after (s)",
              "agent threads before / during / after", "agent RSS MiB before / during / "
              "after / after a second flood"]
    return _table(header, rows)


def _attribution(report: Report) -> list[str]:
    rows = [[a.case, _fmt(a.gpu_processes), _fmt(a.idle_host_processes),
             _fmt(a.host_processes_seen), _fmt(a.attribute_us_median, 1),
             _fmt(a.attribute_us_p99, 1), _fmt(a.process_cpu_us_per_cycle, 1),
             _fmt(a.nvml_ms_median, 3), _fmt(a.proc_reads_after_warmup),
             _fmt(a.readings_per_cycle)]
            for a in report.attribution]
    header = ["attribution case", "GPU processes", "idle host processes started",
              "processes on the host", "attribution CPU / cycle (µs, median)", "p99 (µs)",
              "whole process CPU / cycle (µs)", "NVML process reads / cycle (ms)",
              "/proc reads after warm-up", "readings / cycle"]
    return _table(header, rows)


def _events(report: Report) -> list[str]:
    rows = [[e.case, _fmt(e.gpus), _fmt(e.events), _fmt(e.p50_ms, 2), _fmt(e.p99_ms, 2),
             _fmt(e.max_ms, 2), _fmt(e.mean_ms, 2),
             f"{_fmt(e.command_p50_ms, 2)} / {_fmt(e.command_p99_ms, 2)}",
             _fmt(e.wal_ms_per_event, 3), _fmt(e.suppressed)]
            for e in report.events]
    header = ["event case", "GPUs", "XIDs (one at a time)", "p50 (ms)", "p99 (ms)", "max (ms)",
              "mean (ms)", "from the control command: p50 / p99 (ms)",
              "write-ahead (fsync) / event (ms, in it)",
              "held back by storm control"]
    return _table(header, rows)


def _chaos(report: Report) -> list[str]:
    rows = [[c.case, f"{c.gpus} GPUs, {c.minutes:g} min at {c.rate * 100:g} % "
             f"(seed {c.seed}), {c.interval_s:g} s sampling",
             f"{_fmt(c.errors_injected)} / {_fmt(c.errors_counted)}",
             f"{_fmt(c.samples_exported)} of {_fmt(c.samples_expected)} "
             f"({c.gpus_exporting} GPUs)",
             f"{_fmt(c.missed_cycles)} / {_fmt(c.read_errors)}",
             f"{_fmt(c.calls_per_cycle_calm, 2)} → {_fmt(c.calls_per_cycle_chaos, 2)}",
             f"{_fmt(c.rss_mib[0][1], 1)} → {_fmt(c.rss_mib[-1][1], 1)} "
             f"(max {_fmt(max(m for _, m in c.rss_mib), 1)})",
             "yes" if c.agent_alive else "**no**"]
            for c in report.chaos]
    header = ["chaos case", "node and error rate", "errors injected / counted",
              "hw.power samples exported", "missed cycles / failed group reads",
              "NVML calls per cycle: calm → chaos", "agent RSS MiB: start → end",
              "agent alive"]
    return _table(header, rows)


def _storm(report: Report) -> list[str]:
    rows = [[s.case, f"{_fmt(s.xids)} on 1 of {s.gpus} GPUs ({s.interval_s:g} s sampling, "
             f"{s.storm_window_s:g} s window)", _fmt(int(s.inject_per_s)),
             _fmt(s.first_record_ms, 1), _fmt(s.accounted_s, 2),
             f"{_fmt(s.log_records)} ({_fmt(s.xids_in_records)} XIDs)", _fmt(s.wal_writes),
             _fmt(s.cpu_ms_per_1000_xids, 1), _fmt(s.rest_cpu_percent, 2),
             f"{_fmt(s.max_gap_intervals, 2)} / {_fmt(s.missed_cycles)}"]
            for s in report.storm]
    header = ["storm case", "XIDs injected at once", "injected / s",
              "first XID → first record (ms)", "first XID → every XID in a record (s)",
              "log records (XIDs they account for)", "write-ahead fsyncs (whole run)",
              "agent CPU per 1000 XIDs (ms)",
              "agent CPU at rest (% of one core)",
              "other GPUs: largest sample gap (intervals) / missed cycles"]
    return _table(header, rows)


def _ebpf_call_cost(report: Report) -> list[str]:
    rows = [[c.case, " / ".join(f"`{f}`: {i}" for f, i in c.entry_instructions.items()),
             _fmt(c.uprobes_per_call), _fmt(c.untraced_ns_per_call, 1),
             _fmt(c.traced_ns_per_call, 1), f"**{_fmt(c.overhead_ns_per_call, 0)}**",
             f"{_fmt(c.overhead_ns_min, 0)} to {_fmt(c.overhead_ns_max, 0)}",
             f"{c.repetitions} x {_fmt(c.calls_per_repetition)}",
             f"{_fmt(c.launches_counted)} / {_fmt(c.repetitions * c.calls_per_repetition)}"]
            for c in report.ebpf_call_cost]
    header = ["call-cost case", "traced functions open with", "uprobes / call",
              "untraced (ns / call)", "traced (ns / call)", "cost per traced call (ns, median)",
              "min to max (ns)", "pairs x calls", "launches counted by the agent / traced"]
    return _table(header, rows)


def _ebpf_load(report: Report) -> list[str]:
    lines: list[str] = []
    for case in report.ebpf_load:
        def row(label: str, cell: Callable[[EbpfLoadRun], str],
                runs: tuple[EbpfLoadRun, EbpfLoadRun] = (case.off, case.on)) -> list[str]:
            return [label, *(cell(run) for run in runs)]
        rows = [
            row("cudaLaunchKernel / s achieved", lambda r: _fmt(int(r.launches_per_s))),
            row("window (s) / fast cycles", lambda r: f"{r.window_s:.0f} / {r.cycles}"),
            row("agent CPU % of one core", lambda r: _fmt(r.agent_cpu_percent_one_core, 2)),
            row("agent CPU per cycle (ms)", lambda r: _fmt(r.agent_cpu_ms_per_cycle, 1)),
            row("agent peak RSS (MiB)", lambda r: _fmt(r.agent_peak_rss_mib, 1)),
            row("workload CPU % of one core (uprobes land here)",
                lambda r: _fmt(r.workload_cpu_percent_one_core, 1)),
            row("launches counted by the agent / made",
                lambda r: "—" if r.launches_counted is None
                else f"{_fmt(r.launches_counted)} / {_fmt(r.launches_made)}"),
            row("missed cycles", lambda r: _fmt(r.missed_cycles)),
            row("agent stop after SIGTERM (s)", lambda r: _fmt(r.agent_stop_s, 2)),
        ]
        lines += _table([f"{case.case} ({case.gpus} GPUs, {case.interval_s:g} s; "
                         f"{_fmt(int(case.rate_requested))} launches / s requested, "
                         f"{case.entry} entry)", "plugin off", "plugin on"], rows)
    return lines


def _skipped(report: Report) -> list[str]:
    return [f"- skipped {s.case}: {s.reason}" for s in report.skipped]


def ebpf_markdown(report: Report, heading: str = "####") -> str:
    """The eBPF plugin's overhead: its own block in docs/benchmarks.md."""
    kind = "a smoke run: figures only prove the suite works" if report.smoke else "full run"
    lines = [
        f"Measured {report.started} ({kind}) with `{EBPF_COMMAND}` on: {_machine(report)}",
        "",
        f"{heading} Cost per traced CUDA call",
        "",
        *_ebpf_call_cost(report),
        "",
        f"{heading} Agent and workload CPU at 100 000 launches per second",
        "",
        *_ebpf_load(report),
        "",
        *_skipped(report),
        *(f"- {note}" for note in EBPF_NOTES),
    ]
    return "\n".join(lines) + "\n"


def _machine(report: Report) -> str:
    m = report.machine
    packages = m.get("packages", {})
    versions = ", ".join(f"{k} {v}" for k, v in packages.items()) if isinstance(
        packages, dict) else ""
    return (f"{m['cpu_model']}, {m['usable_cores']} usable of {m['logical_cores']} logical "
            f"cores, {m['memory_gib']} GiB, Linux {m['kernel']}, Python {m['python']}; "
            f"{versions}; load average at the end {m.get('load_average_1m_5m_15m')}.")


def markdown(report: Report, heading: str = "###", ebpf: bool = True,
             chaos: bool = True) -> str:
    kind = "smoke run (figures only prove the suite works)" if report.smoke else "full run"
    lines = [
        f"Measured {report.started} ({kind}, {report.duration_s:.0f} s) with `{COMMAND}` on: "
        f"{_machine(report)}",
        "",
        f"{heading} Agent on the simulated node (OTLP/gRPC to a local receiver)",
        "",
        *_table(["figure", "target", *(a.case for a in report.agent)], _agent_rows(report)),
        "",
        *_by_function(report),
        "",
        f"{heading} Where a cycle's CPU goes",
        "",
        *_costs(report),
        "",
        f"{heading} Host process churn: 500 short non-GPU processes a second",
        "",
        *_churn(report),
        "",
        f"{heading} Peers on the same node (ratio = peer / agent)",
        "",
        *_peers(report),
        "",
        f"{heading} Encoding one export",
        "",
        *_encoding(report),
        "",
        f"{heading} Prometheus endpoint: scrape size, and 300 idle connections at once",
        "",
        *_prometheus(report),
        "",
        f"{heading} Attribution cost per cycle",
        "",
        *_attribution(report),
        "",
        f"{heading} Health events: XID injected → log record at the receiver",
        "",
        *_events(report),
        "",
        f"{heading} Health events: a storm of one XID",
        "",
        *_storm(report),
        "",
        *([f"{heading} NVML chaos: errors the driver documents, for minutes", "",
           *_chaos(report), ""] if chaos else []),
        *([f"{heading} Memory: short-lived GPU processes for minutes", "",
           *_soak(report), ""] if chaos and report.soak else []),
        *([f"{heading} Health events through faults: kill -9, outages, throttling, poison",
           "", *_faults(report), ""] if chaos and report.faults else []),
        *([f"{heading} Hostile peers: idle TLS waves, a password flood, huge answers",
           "", *_hostile(report), ""] if chaos and report.hostile else []),
        f"{heading} How to read these",
        "",
        *(f"- {note}" for note in report.notes),
    ]
    if ebpf and (report.ebpf_call_cost or report.ebpf_load or report.skipped):
        lines += ["", f"{heading} eBPF plugin overhead", "", ebpf_markdown(report, heading + "#")]
    return "\n".join(lines) + "\n"


def write_markdown(report: Report, path: Path) -> None:
    path.write_text("# gpu-otel-agent benchmark\n\n" + markdown(report, "##")
                    + "\n## Fleet sizing from this run\n\n" + sizing.markdown(report),
                    encoding="utf-8")


def readme_block(report: Report) -> str:
    """The page keeps how to run the suite above the latest full run's tables (the eBPF
    plugin's figures go to their own block, :func:`ebpf_markdown`)."""
    return f"{USAGE}\n\n{markdown(report, ebpf=False, chaos=False)}"


def _soak(report: Report) -> list[str]:
    rows = []
    for s in report.soak:
        end = s.rss_mib[-1]
        step = max(1, len(s.rss_mib) // 10)
        curve = ", ".join(f"{t / 60:.1f} min: {m:.1f}" for t, m in
                           (*s.rss_mib[:-1:step], end))
        rows.append([s.case, f"{s.gpus} GPUs, {s.minutes:g} min at {s.interval_s:g} s sampling",
                     f"{_fmt(s.processes)} ({s.lifetime_s:g} s each)",
                     f"{_fmt(s.rss_mib[0][1], 1)} → {_fmt(s.rss_after_quarter_mib, 1)} → "
                     f"{_fmt(end[1], 1)}",
                     f"{s.growth_after_quarter_mib:+.1f}", curve,
                     "yes" if s.agent_alive else "**no**"])
    header = ["soak case", "node and sampling", "short-lived GPU processes",
              "agent RSS MiB: start → ¼ → end", "growth after ¼ (MiB)",
              "RSS curve (MiB)", "agent alive"]
    return _table(header, rows)


def _faults(report: Report) -> list[str]:
    rows = [[f.case, f"{f.minutes:g} min (seed {f.seed})",
             f"{f.kills} / {f.outages} / {f.throttles} / {f.poison_records}",
             _fmt(f.xids_injected), _fmt(f.xids_delivered), _fmt(f.lost),
             _fmt(f.distinct_records), _fmt(f.duplicates), _fmt(f.quarantined),
             _fmt(f.longest_wait_s, 1)]
            for f in report.faults]
    header = ["fault case", "length", "kill -9 / outages / throttles / poison",
              "XIDs injected (agent up)", "delivered", "lost", "distinct records",
              "duplicates", "quarantined", "longest wait (s)"]
    return _table(header, rows)


def _hostile(report: Report) -> list[str]:
    rows = [[h.case, f"{h.waves} x {_fmt(h.per_wave)}: {_fmt(h.closed_by_server)} closed",
             f"{h.flood_clients} for {h.flood_s:g} s (bcrypt cost {h.bcrypt_cost}): "
             f"{_fmt(h.guesses_refused)} / {_fmt(h.guesses_throttled)}",
             f"{_fmt(h.probes)}: {_fmt(h.probe_ms_median, 1)} / {_fmt(h.probe_ms_max, 1)}",
             f"{_fmt(h.scrapes)}: {_fmt(h.scrape_ms_median, 1)} / {_fmt(h.scrape_ms_max, 1)}",
             f"{h.body_mib} MiB x {_fmt(h.exports_answered_big)}",
             f"{_fmt(h.baseline_rss_mib, 1)} → {_fmt(h.after_waves_rss_mib, 1)} → "
             f"peak {_fmt(h.peak_rss_mib, 1)}"]
            for h in report.hostile]
    header = ["hostile case", "silent TLS connections (waves x per wave): closed by the agent",
              "password guessers: answered 401 / 429",
              "/healthz during the flood: probes, median / max ms",
              "known scraper during the flood: scrapes, median / max ms",
              "OTLP/HTTP answers x exports", "agent RSS MiB: baseline → after waves → peak"]
    return _table(header, rows)


def hostile_markdown(report: Report) -> str:
    """The hostile peers' table, for its own block (``--only hostile-peers``)."""
    kind = "smoke run" if report.smoke else "run"
    notes = [n for n in report.notes if n.startswith("hostile-peers")]
    return "\n".join([f"Measured {report.started} ({kind}) on: {_machine(report)}", "",
                      *_hostile(report), "", *(f"- {n}" for n in notes)]) + "\n"


def faults_markdown(report: Report) -> str:
    """The fault soak's table, for its own block (``--only fault-soak``)."""
    kind = "smoke run" if report.smoke else "run"
    notes = [n for n in report.notes if n.startswith("fault-soak")]
    return "\n".join([f"Measured {report.started} ({kind}) on: {_machine(report)}", "",
                      *_faults(report), "", *(f"- {n}" for n in notes)]) + "\n"


def soak_markdown(report: Report) -> str:
    """The memory soak's table, for its own block of docs/benchmarks.md (``--only soak``)."""
    kind = "smoke run" if report.smoke else "full-length run"
    notes = [n for n in report.notes if n.startswith("soak")]
    return "\n".join([f"Measured {report.started} ({kind}) on: {_machine(report)}", "",
                      *_soak(report), "", *(f"- {n}" for n in notes)]) + "\n"


def chaos_markdown(report: Report) -> str:
    """The long chaos run's table, for its own block of docs/benchmarks.md: it takes minutes
    alone, so it is re-measured on its own (``--only nvml-chaos``), not only with the whole
    suite."""
    kind = "smoke run" if report.smoke else "full-length run"
    notes = [n for n in report.notes if n.startswith("nvml-chaos")]
    return "\n".join([f"Measured {report.started} ({kind}) on: {_machine(report)}", "",
                      *_chaos(report), "", *(f"- {n}" for n in notes)]) + "\n"
