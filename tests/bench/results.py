"""What every case reports: typed, frozen, and serialised as-is into report.json."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AgentResult:
    case: str
    scenario: str
    gpus: int
    gpu_processes: int
    interval_s: float  # fast-group sampling interval
    window_s: float
    cycles: int  # fast cycles inside the window (exact: the window is cycle-aligned)
    cpu_s_per_min: float
    cpu_percent_one_core: float
    peak_rss_mib: float
    first_export_s: float  # process start -> first metrics request at the receiver
    calls_per_gpu_per_cycle: float  # every NVML call in the window (fast + slow + gpm)
    calls_by_function: Mapping[str, float]  # per GPU per fast cycle
    fast_calls_per_gpu_per_cycle: float  # with slow and gpm disabled (fast group only)
    fast_calls_by_function: Mapping[str, float]
    fast_window_cycles: int
    missed_cycles: int  # from the agent's run summary, whole run, all devices and groups
    deadline_overruns: int
    errors: int
    group_cycles: int
    exports: int
    export_failures: int
    exports_in_window: int
    payload_bytes_mean: float  # serialised ExportMetricsServiceRequest at the receiver
    payload_bytes_last: int
    points_per_export: int
    costs: CycleCosts | None = None  # the main window's per-cycle breakdown
    payload_gzip_bytes: int = 0  # the last export's request, gzip'd (level 6, as sent with gzip)
    # The last export's points by family: device, per-process, per-container, self-telemetry
    points_by_family: Mapping[str, int] = field(default_factory=dict)
    export_interval_s: float = 0.0  # the export interval (= interval_s but at the defaults)


@dataclass(frozen=True)
class ExporterPeerResult:
    """nvitop-exporter: its own update loop at the interval, scraped over HTTP at the interval."""

    case: str
    scenario: str
    gpus: int
    interval_s: float
    window_s: float
    cycles: int
    cpu_s_per_min: float
    cpu_percent_one_core: float
    peak_rss_mib: float
    calls_per_gpu_per_cycle: float
    calls_by_function: Mapping[str, float]
    scrapes: int
    scrape_bytes_last: int
    compared_with: str  # the agent case the ratios divide by
    ratios: Mapping[str, float]  # peer / agent


@dataclass(frozen=True)
class OneShotPeerResult:
    """gpustat --json: a whole short-lived process per invocation."""

    case: str
    scenario: str
    gpus: int
    invocations: int
    wall_s_per_invocation: float
    cpu_s_per_invocation: float
    peak_rss_mib: float
    calls_per_gpu_per_invocation: float
    calls_by_function: Mapping[str, float]  # per GPU per invocation
    processes_listed: int
    compared_with: str
    ratios: Mapping[str, float]  # peer (one invocation per interval) / agent


@dataclass(frozen=True)
class EncodeResult:
    case: str
    scenario: str
    gpus: int
    method: str
    repeats: int
    points: int
    sdk_encode_ms: float  # SDK path for comparison: encode + encode_metrics + serialise, median
    total_ms: float  # the agent's path: ProtoEncoder.encode + serialise, median
    payload_bytes: int  # SerializeToString of the in-process request
    read_ms: float  # reading all groups of all GPUs in-process once (for context)


@dataclass(frozen=True)
class AttributionResult:
    """Per-cycle cost of attributing GPU processes, at one count of idle host processes."""

    case: str
    method: str
    gpu_processes: int
    idle_host_processes: int  # started for the case
    host_processes_seen: int  # every process in /proc during the case
    in_cgroups: bool  # the GPU processes sat in real kubepods cgroups
    cycles: int
    attribute_us_median: float  # CPU of Attribution.readings over all GPUs, one cycle
    attribute_us_p99: float
    nvml_ms_median: float  # the NVML process reads of one cycle, for context
    process_cpu_us_per_cycle: float  # the whole measuring process, event handling included
    proc_reads_after_warmup: int  # /proc lookups during the measured cycles
    proc_reads_total: int
    readings_per_cycle: int


@dataclass(frozen=True)
class EventLatencyResult:
    """Health events: XID in the simulated node's event ring -> log record at the receiver
    (``command_*``: from just before the control command that queues it, its round trip
    through the node's daemon included, as runs before 2026-11-27 measured)."""

    case: str
    scenario: str
    gpus: int
    events: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    sent: int  # events the agent's exporter had accepted at exit
    suppressed: int  # storm control must hold none of them back
    # Write-ahead: each event fsynced to the spool before its first send (one at a time here,
    # so one write per event); its mean cost inside the agent, and the events per write.
    wal_ms_per_event: float = 0.0
    wal_events_per_write: float = 0.0
    command_p50_ms: float = 0.0
    command_p99_ms: float = 0.0


@dataclass(frozen=True)
class StormResult:
    """A storm of one XID on one GPU: injection, storm control's summaries, cost, cadence."""

    case: str
    scenario: str
    gpus: int
    interval_s: float  # sampling = export interval
    storm_window_s: float  # health.storm_window
    xids: int  # injected, every one acknowledged by the node
    inject_s: float  # first line sent -> last answer, one pipelined control connection
    inject_per_s: float
    first_record_ms: float  # first XID sent -> the storm's first log record at the receiver
    first_is_single: bool  # the first record is the XID itself, not a summary
    accounted_s: float  # first XID sent -> counter and summaries at the receiver add up to xids
    xids_counted: int  # the agent's gpu.xid.errors counter at the end
    xids_in_records: int  # 1 per plain record + gpu.event.count of each summary
    log_records: int  # gpu.xid events the storm produced (storm control's compression)
    suppressed: int  # occurrences folded into summaries (the agent's run summary)
    agent_cpu_s: float  # utime + stime over [first XID sent, accounted]
    rest_cpu_percent: float  # the same agent just before, at rest (percent of one core)
    cpu_ms_per_1000_xids: float  # storm CPU less the rest rate over as long, per 1000 XIDs
    other_gpus: int
    max_gap_intervals: float  # largest gap between another GPU's samples at the receiver
    missed_cycles: int  # the other GPUs' gpu_agent.cycles.missed over the storm, summed
    wal_writes: int = 0  # write-ahead fsync groups over the whole run (storm included)


@dataclass(frozen=True)
class ChaosResult:
    """Minutes of NVML chaos on one node: errors injected and counted, completeness, memory."""

    case: str
    scenario: str
    gpus: int
    minutes: float
    rate: float  # probability that an NVML call answers an error
    seed: int
    interval_s: float  # sampling = export interval
    errors_injected: int  # by the node over the window (calls + per-field)
    errors_counted: int  # the agent's gpu_agent.library.errors over the window, at the receiver
    injected_by_code: Mapping[str, int]  # whole-call errors per code
    field_errors_injected: int  # per-field codes of nvmlDeviceGetFieldValues
    samples_exported: int  # hw.power samples at the receiver over the window, all GPUs
    samples_expected: int  # GPUs x cycles in the window
    gpus_exporting: int
    distinct_sample_times: int
    missed_cycles: int  # gpu_agent.cycles.missed over the window, all GPUs
    read_errors: int  # gpu_agent.read.errors over the window (group reads that raised)
    calls_per_cycle_calm: float  # NVML calls per group read before chaos
    calls_per_cycle_chaos: float  # the same under chaos (a retry storm would raise it)
    rss_mib: tuple[tuple[float, float], ...]  # (seconds into chaos, resident MiB)
    rss_growth_mib: float  # last - first
    agent_alive: bool


@dataclass(frozen=True)
class EbpfCallCostResult:
    """ns per traced cudaLaunchKernel (its runtime uprobe and the nested driver call's)."""

    case: str
    method: str
    calls_per_repetition: int
    repetitions: int  # untraced/traced pairs
    uprobes_per_call: int
    entry: str  # the stand-in variant: how its traced functions open (nop / endbr64)
    entry_instructions: Mapping[str, str]  # traced function -> its first instruction
    untraced_ns_per_call: float  # medians over the repetitions
    traced_ns_per_call: float
    overhead_ns_per_call: float  # median of the pairs' (traced - untraced) / calls
    overhead_ns_min: float
    overhead_ns_max: float
    launches_counted: int  # by the agent, at the receiver: equals the traced calls


@dataclass(frozen=True)
class EbpfLoadRun:
    plugin: str  # "off" or "on"
    window_s: float
    cycles: int
    agent_cpu_percent_one_core: float
    agent_cpu_ms_per_cycle: float
    agent_peak_rss_mib: float
    workload_cpu_percent_one_core: float  # where the uprobes' cost lands
    launches_made: int  # by the whole busy command (it outlasts the window)
    launches_per_s: float  # achieved by the busy command
    launches_counted: int | None  # by the agent at the receiver (None: plugin off)
    missed_cycles: int
    agent_stop_s: float  # SIGTERM -> exit (detaching the uprobes included)


@dataclass(frozen=True)
class EbpfLoadResult:
    """The agent with the eBPF plugin off and on while a process launches at ``rate``/s."""

    case: str
    scenario: str
    gpus: int
    interval_s: float
    rate_requested: float
    entry: str
    off: EbpfLoadRun
    on: EbpfLoadRun


@dataclass(frozen=True)
class PrometheusFloodResult:
    """The Prometheus endpoint: scrape size and latency, and a flood of idle connections."""

    case: str
    scenario: str
    gpus: int
    connections: int  # idle sockets opened at once
    scrapes: int  # per latency median
    plain_bytes: int  # text 0.0.4, no compression
    gzip_openmetrics_bytes: int  # what Prometheus asks for: OpenMetrics, gzip
    openmetrics_served: bool
    scrape_ms_idle: float  # median, fresh connection per scrape, nothing else connected
    scrape_ms_flood: float  # median, while the idle sockets are open
    held_max: int  # most idle sockets the agent held open at once within 15 s (/proc/<pid>/fd)
    accepts_per_s: float  # connections / all_held_s (NaN: never all held at once)
    all_held_s: float  # connects -> the agent holds every one of them (NaN: never)
    eighth_held_s: float  # connects -> the agent holds 8 of them

    threads_before: int  # the agent's threads
    threads_flood: int  # most seen while the flood was open
    threads_after: int
    rss_before_mib: float  # the agent's resident memory
    rss_flood_mib: float
    rss_after_mib: float  # a few seconds after the idle sockets closed
    rss_after_second_mib: float  # the same again after a second identical flood


@dataclass(frozen=True)
class ChurnResult:
    """The agent's CPU over a quiet window and one of host process churn (exec/exit of short
    non-GPU processes at a fixed rate)."""

    case: str
    attribution: bool
    rate_requested: float
    execs_per_s: float  # achieved by the generator
    window_s: float
    cpu_percent_quiet: float
    cpu_percent_churn: float
    cpu_percent_added: float
    us_per_exec: float  # the added CPU per exec/exit pair
    peak_rss_mib: float
    agent_alive: bool


@dataclass(frozen=True)
class SoakResult:
    """Minutes of short-lived GPU processes coming and going: the agent's memory."""

    case: str
    scenario: str
    gpus: int
    minutes: float
    interval_s: float  # sampling = export interval
    processes: int  # real short-lived processes registered as GPU processes, then gone
    lifetime_s: float
    rss_mib: tuple[tuple[float, float], ...]  # (seconds into the run, resident MiB)
    rss_after_quarter_mib: float  # warm-up over
    growth_after_quarter_mib: float  # end - after the first quarter (the issue: within 2)
    agent_alive: bool


@dataclass(frozen=True)
class FaultSoakResult:
    """Minutes of kill -9, collector outages, throttling and a poison record with XIDs
    injected throughout: what reached the collector."""

    case: str
    scenario: str
    minutes: float
    seed: int
    kills: int  # kill -9 of the agent (started again on the same spool)
    outages: int  # the collector stopped for a while
    throttles: int  # RESOURCE_EXHAUSTED with RetryInfo for a while
    poison_records: int  # XIDs the collector refuses for good (INVALID_ARGUMENT)
    xids_injected: int  # while the agent was up (the poison one apart)
    xids_delivered: int  # accounted for by accepted records (a summary: its count)
    distinct_records: int  # distinct log.record.uid accepted
    duplicates: int  # accepted copies of an already accepted uid
    quarantined: int  # lines in the spool's dead-letter file
    lost: int  # injected - delivered
    longest_wait_s: float  # fault time -> its first accepted copy


@dataclass(frozen=True)
class HostilePeerResult:
    """Idle TLS waves, a password flood and a collector answering huge bodies against one
    running agent (issue 39): its memory and how long a probe and a scrape waited."""

    case: str
    scenario: str
    waves: int  # waves of silent TCP connections to /metrics over TLS
    per_wave: int
    closed_by_server: int  # of waves x per_wave: closed by the agent (handshake deadline)
    flood_clients: int  # clients guessing passwords
    flood_s: float
    bcrypt_cost: int
    body_mib: int  # each OTLP/HTTP answer's body
    baseline_rss_mib: float  # after warm-up
    after_waves_rss_mib: float
    peak_rss_mib: float  # over the whole case
    probes: int  # /healthz answered 200 during the flood
    probe_ms_median: float
    probe_ms_max: float
    scrapes: int  # /metrics with the right password, answered 200 during the flood
    scrape_ms_median: float
    scrape_ms_max: float
    guesses_refused: int  # answered 401 (a password check)
    guesses_throttled: int  # answered 429 (too many checks at once)
    exports_answered_big: int  # OTLP/HTTP exports answered with the big body


@dataclass(frozen=True)
class CycleCosts:
    """Where an agent case's CPU went, per fast cycle (µs), from the agent's own stage and
    thread clocks (``threads.costs``, logged on SIGUSR1 at both ends of the main window)."""

    cycles: float  # fast cycles the window spans (its length over the interval)
    stages_us: Mapping[str, float]
    threads_us: Mapping[str, float]
    process_us: float


@dataclass(frozen=True)
class SkippedCase:
    case: str
    reason: str


@dataclass(frozen=True)
class Report:
    smoke: bool
    started: str
    duration_s: float
    machine: Mapping[str, object]
    targets: Mapping[str, float]
    agent: tuple[AgentResult, ...] = ()
    exporter_peers: tuple[ExporterPeerResult, ...] = ()
    one_shot_peers: tuple[OneShotPeerResult, ...] = ()
    encoding: tuple[EncodeResult, ...] = ()
    attribution: tuple[AttributionResult, ...] = ()
    events: tuple[EventLatencyResult, ...] = ()
    storm: tuple[StormResult, ...] = ()
    chaos: tuple[ChaosResult, ...] = ()
    soak: tuple[SoakResult, ...] = ()
    faults: tuple[FaultSoakResult, ...] = ()
    hostile: tuple[HostilePeerResult, ...] = ()
    ebpf_call_cost: tuple[EbpfCallCostResult, ...] = ()
    ebpf_load: tuple[EbpfLoadResult, ...] = ()
    prometheus: tuple[PrometheusFloodResult, ...] = ()
    churn: tuple[ChurnResult, ...] = ()
    skipped: tuple[SkippedCase, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
