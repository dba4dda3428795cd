"""``python -m tests.bench``: run the benchmark suite and write report.json and report.md."""

from __future__ import annotations

import argparse
import datetime
import logging
import signal
import sys
import tempfile
import time
from pathlib import Path

from tests.bench import ebpf_case, machine, plan, readme, report, sizing
from tests.bench.agent_case import run_agent_case
from tests.bench.attribution import run_attribution_case
from tests.bench.chaos_case import run_chaos_case
from tests.bench.churn_case import run_churn_case
from tests.bench.ebpf_case import run_call_cost_case, run_load_case
from tests.bench.encoding import run_encode_case
from tests.bench.events_case import run_event_case
from tests.bench.fault_case import run_fault_case
from tests.bench.hostile_case import run_hostile_case
from tests.bench.peers import run_gpustat, run_nvitop_exporter
from tests.bench.prometheus_flood import run_prometheus_flood_case
from tests.bench.results import (
    AgentResult,
    EbpfCallCostResult,
    EbpfLoadResult,
    Report,
    SkippedCase,
)
from tests.bench.soak_case import run_soak_case
from tests.bench.storm_case import run_storm_case

log = logging.getLogger("tests.bench")


def _agent_case(results: tuple[AgentResult, ...], name: str) -> AgentResult:
    return next(r for r in results if r.case == name)


def run(suite: plan.Plan, workdir: Path) -> Report:
    started_wall = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    started = time.monotonic()
    agents: list[AgentResult] = []
    for case in suite.agent:
        log.info("%s: %d cycles at %gs", case.name, case.cycles, case.interval)
        agents.append(run_agent_case(case, workdir / case.name))
    done = tuple(agents)
    exporters = []
    for peer in suite.nvitop_exporter:
        log.info("%s: %d cycles at %gs", peer.name, peer.cycles, peer.interval)
        exporters.append(run_nvitop_exporter(peer, workdir / peer.name,
                                             _agent_case(done, peer.compare_with)))
    one_shots = []
    for peer in suite.gpustat:
        log.info("%s: %d invocations", peer.name, peer.cycles)
        one_shots.append(run_gpustat(peer, workdir / peer.name,
                                     _agent_case(done, peer.compare_with)))
    encodings = []
    for enc in suite.encode:
        log.info("%s: %d repeats", enc.name, enc.repeats)
        encodings.append(run_encode_case(enc, workdir / enc.name))
    attribution = []
    for att in suite.attribution:
        log.info("%s: %d cycles, %d idle host processes", att.name, att.cycles,
                 att.host_processes)
        attribution.append(run_attribution_case(att, workdir / att.name))
    events = []
    for ev in suite.events:
        log.info("%s: %d events, one at a time", ev.name, ev.events)
        events.append(run_event_case(ev, workdir / ev.name))
    storms = []
    for storm in suite.storm:
        log.info("%s: %d XIDs on GPU %d at once, %gs sampling, %gs storm window", storm.name,
                 storm.xids, storm.device, storm.interval, storm.storm_window)
        storms.append(run_storm_case(storm, workdir / storm.name))
    floods = []
    for flood in suite.prometheus:
        log.info("%s: %d idle connections at once, %d scrapes", flood.name, flood.connections,
                 flood.scrapes)
        floods.append(run_prometheus_flood_case(flood, workdir / flood.name))
    churns = []
    for churn in suite.churn:
        log.info("%s: %g execs/s for %gs, attribution %s", churn.name, churn.rate,
                 churn.window_s, "on" if churn.attribution else "off")
        churns.append(run_churn_case(churn, workdir / churn.name))
    chaos = []
    for case in suite.chaos:
        log.info("%s: %g min at %g%% NVML errors (seed %d) on %s", case.name, case.minutes,
                 case.rate * 100, case.seed, case.scenario.name)
        chaos.append(run_chaos_case(case, workdir / case.name))
    soaks = []
    for soak in suite.soak:
        log.info("%s: %g min at %gs sampling, %g short-lived GPU process(es) a second",
                 soak.name, soak.minutes, soak.interval, soak.per_second)
        soaks.append(run_soak_case(soak, workdir / soak.name))
    faults = []
    for fault in suite.faults:
        log.info("%s: %g min of kill -9, outages, throttling and a poison record, %g XIDs/s",
                 fault.name, fault.minutes, fault.xids_per_s)
        faults.append(run_fault_case(fault, workdir / fault.name))
    hostile = []
    for peer in suite.hostile:
        log.info("%s: %d x %d silent TLS connections, %d password guessers for %gs, "
                 "%d MiB answers", peer.name, peer.waves, peer.per_wave, peer.flood_clients,
                 peer.flood_s, peer.body_mib)
        hostile.append(run_hostile_case(peer, workdir / peer.name))
    skipped: list[SkippedCase] = []
    call_costs: list[EbpfCallCostResult] = []
    for cost in suite.ebpf_call_cost:
        if (reason := _skip(cost.name, ebpf_case.unsupported(cost.entry))) is not None:
            skipped.append(reason)
            continue
        log.info("%s: %d x %d calls (%s entry)", cost.name, cost.repetitions, cost.calls,
                 cost.entry)
        call_costs.append(run_call_cost_case(cost, workdir / cost.name))
    loads: list[EbpfLoadResult] = []
    for load in suite.ebpf_load:
        if (reason := _skip(load.name, ebpf_case.unsupported(load.entry))) is not None:
            skipped.append(reason)
            continue
        log.info("%s: %d cycles at %gs, plugin off then on, %g launches/s", load.name,
                 load.cycles, load.interval, load.rate)
        loads.append(run_load_case(load, workdir / load.name))
    return Report(
        smoke=suite.smoke,
        started=started_wall,
        duration_s=round(time.monotonic() - started, 1),
        machine=machine.describe(),
        targets=plan.TARGETS,
        agent=done,
        exporter_peers=tuple(exporters),
        one_shot_peers=tuple(one_shots),
        encoding=tuple(encodings),
        attribution=tuple(attribution),
        events=tuple(events),
        storm=tuple(storms),
        chaos=tuple(chaos),
        soak=tuple(soaks),
        faults=tuple(faults),
        hostile=tuple(hostile),
        ebpf_call_cost=tuple(call_costs),
        ebpf_load=tuple(loads),
        prometheus=tuple(floods),
        churn=tuple(churns),
        skipped=tuple(skipped),
        notes=report.NOTES,
    )


def _skip(case: str, reason: str | None) -> SkippedCase | None:
    if reason is None:
        return None
    log.warning("%s skipped: %s", case, reason)
    return SkippedCase(case, reason)


def _select(suite: plan.Plan, only: list[str] | None,
            parser: argparse.ArgumentParser) -> plan.Plan:
    if not only:
        return suite
    names = {name for arg in only for name in arg.split(",") if name}
    unknown = names - set(suite.case_names())
    if unknown:
        parser.error(f"no such case: {', '.join(sorted(unknown))} "
                     f"(cases: {', '.join(suite.case_names())})")
    chosen = suite.only(names)
    for peer in (*chosen.nvitop_exporter, *chosen.gpustat):
        if peer.compare_with not in names:
            parser.error(f"{peer.name} is compared with {peer.compare_with}: select it too")
    return chosen


def _update_readme(result: Report, ran: plan.Plan, full: plan.Plan) -> None:
    """Each generated block of docs/benchmarks.md is rewritten only from a run of all its cases."""
    path = readme.BENCHMARKS_PAGE
    ebpf_names = {c.name for c in (*full.ebpf_call_cost, *full.ebpf_load)}
    chaos_names = {c.name for c in full.chaos}
    soak_names = {c.name for c in full.soak}
    fault_names = {c.name for c in full.faults}
    hostile_names = {c.name for c in full.hostile}
    main_names = (set(full.case_names()) - ebpf_names - chaos_names - soak_names
                  - fault_names - hostile_names)
    done = set(ran.case_names())
    if main_names <= done:
        readme.update(path, report.readme_block(result))
        readme.update(path, sizing.markdown(result), readme.SIZING_START, readme.SIZING_END)
        log.info("updated the benchmark and fleet sizing sections of %s", path)
    elif main_names & done:
        log.warning("benchmark tables in %s left as they were: not all their cases ran", path)
    if ebpf_names <= done and not result.skipped:
        readme.update(path, report.ebpf_markdown(result), readme.EBPF_START, readme.EBPF_END)
        log.info("updated the eBPF overhead block of %s", path)
    elif ebpf_names & done:
        log.warning("eBPF overhead block in %s left as it was: not all its cases ran", path)
    if chaos_names and chaos_names <= done:
        readme.update(path, report.chaos_markdown(result), readme.CHAOS_START, readme.CHAOS_END)
        log.info("updated the NVML chaos block of %s", path)
    if soak_names and soak_names <= done:
        readme.update(path, report.soak_markdown(result), readme.SOAK_START, readme.SOAK_END)
        log.info("updated the memory soak block of %s", path)
    if fault_names and fault_names <= done:
        readme.update(path, report.faults_markdown(result), readme.FAULTS_START,
                      readme.FAULTS_END)
        log.info("updated the fault soak block of %s", path)
    if hostile_names and hostile_names <= done:
        readme.update(path, report.hostile_markdown(result), readme.HOSTILE_START,
                      readme.HOSTILE_END)
        log.info("updated the hostile peers block of %s", path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--output", type=Path, default=Path("bench-results"),
                        help="directory for report.json and report.md (default bench-results/)")
    parser.add_argument("--smoke", action="store_true",
                        help="short windows (under a minute): proves the suite runs")
    parser.add_argument("--update-readme", action="store_true",
                        help="put the Markdown tables into docs/benchmarks.md between the bench "
                             "markers (each block only when all its cases ran)")
    parser.add_argument("--only", action="append", metavar="CASE[,CASE]",
                        help="run only these cases (repeatable; e.g. ebpf-call-cost,ebpf-100k)")
    parser.add_argument("--chaos-minutes", type=float, metavar="M",
                        help=f"length of the nvml-chaos case (default {plan.CHAOS_MINUTES:g}; "
                             "a shorter run's figures are not for the docs)")
    args = parser.parse_args(argv)
    # SIGTERM becomes SystemExit so the finally blocks stop the agent, the peers and the nodes
    # instead of leaving them running without us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    if args.update_readme and args.smoke:
        parser.error("--update-readme records a full run; it cannot be combined with --smoke")
    args.output.mkdir(parents=True, exist_ok=True)
    if args.chaos_minutes is not None and args.chaos_minutes <= 0:
        parser.error("--chaos-minutes must be positive")
    if args.update_readme and args.chaos_minutes not in (None, plan.CHAOS_MINUTES):
        parser.error("--update-readme records a full run: leave --chaos-minutes at its default")
    full = plan.build(args.smoke, args.chaos_minutes)
    suite = _select(full, args.only, parser)
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        result = run(suite, Path(tmp))
    report.write_json(result, args.output / "report.json")
    report.write_markdown(result, args.output / "report.md")
    log.info("wrote %s and %s", args.output / "report.json", args.output / "report.md")
    if args.update_readme:
        _update_readme(result, suite, full)
    return 0
