"""The suite's smoke run, so the benchmark cannot rot: it runs, and its reports are sane.

Only counts and the presence of fields are checked, never timings: speed is reported by the
full run, not asserted on a shared test machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench import plan
from tests.integration.harness import REPO


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--smoke", "--output", str(output)],
        cwd=REPO, capture_output=True, text=True, timeout=420, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return output


@pytest.fixture(scope="module")
def report(smoke: Path) -> dict[str, Any]:
    parsed = json.loads((smoke / "report.json").read_text(encoding="utf-8"))
    assert isinstance(parsed, dict)
    return parsed


@pytest.mark.timeout(430)  # the smoke run is ~110 s on two idle cores
def test_reports_exist_and_contain_every_case(smoke: Path, report: dict[str, Any]) -> None:
    names = [c["case"] for key in ("agent", "exporter_peers", "one_shot_peers", "encoding",
                                   "attribution", "events", "storm", "ebpf_call_cost", "ebpf_load",
                                   "prometheus", "chaos", "churn", "soak", "faults", "hostile",
                                   "skipped")
             for c in report[key]]
    assert sorted(names) == sorted(plan.build(smoke=True).case_names())
    markdown = (smoke / "report.md").read_text(encoding="utf-8")
    for name in names:
        assert name in markdown
    assert report["smoke"] is True
    assert report["machine"]["packages"]["opentelemetry-sdk"] != "not installed"


def test_prometheus_flood_counts_are_sane(report: dict[str, Any]) -> None:
    (case,) = report["prometheus"]
    assert case["openmetrics_served"] is True
    assert 0 < case["gzip_openmetrics_bytes"] < case["plain_bytes"]
    assert case["held_max"] >= case["connections"]  # every idle socket accepted at once
    assert case["threads_flood"] <= case["threads_before"] + 3  # no thread per connection


def test_agent_counts_are_sane(report: dict[str, Any]) -> None:
    for agent in report["agent"]:
        assert agent["cycles"] >= 1
        assert agent["calls_per_gpu_per_cycle"] > 0
        assert agent["fast_calls_per_gpu_per_cycle"] > 0
        assert agent["fast_calls_by_function"]
        assert agent["peak_rss_mib"] > 0
        assert agent["cpu_s_per_min"] >= 0
        assert agent["first_export_s"] > 0
        assert isinstance(agent["missed_cycles"], int)
        assert agent["exports"] >= 1
        assert agent["payload_bytes_last"] > 0
        assert agent["points_per_export"] > 0


def test_peer_counts_are_sane(report: dict[str, Any]) -> None:
    for peer in report["exporter_peers"]:
        assert peer["calls_per_gpu_per_cycle"] > 0
        assert peer["peak_rss_mib"] > 0
        assert peer["scrapes"] >= 1
        assert set(peer["ratios"]) == {"cpu", "rss", "calls"}
    for peer in report["one_shot_peers"]:
        assert peer["calls_per_gpu_per_invocation"] > 0
        assert peer["peak_rss_mib"] > 0
        assert peer["processes_listed"] == 64  # the 8-GPU bench scenario's processes


def test_encoding_is_sane(report: dict[str, Any]) -> None:
    for encoding in report["encoding"]:
        assert encoding["points"] > 0
        assert encoding["payload_bytes"] > 0
        assert encoding["total_ms"] > 0


def test_attribution_counts_are_sane(report: dict[str, Any]) -> None:
    cases = report["attribution"]
    assert [c["idle_host_processes"] for c in cases] == [50, 500]
    for case in cases:
        assert case["gpu_processes"] == 50
        assert case["host_processes_seen"] >= case["idle_host_processes"]
        assert case["proc_reads_total"] == 50  # each GPU process looked up once
        assert case["proc_reads_after_warmup"] == 0
        assert case["readings_per_cycle"] > 50
        assert case["attribute_us_median"] > 0


def test_event_latency_is_sane(report: dict[str, Any]) -> None:
    (case,) = report["events"]
    assert case["events"] == 20
    assert 0 < case["p50_ms"] <= case["p99_ms"] <= case["max_ms"]
    # Each event's time from the command starts before its time in the ring: every rank of
    # the one is at least that of the other (the daemon stamped the ring write in between).
    assert case["p50_ms"] <= case["command_p50_ms"] <= case["command_p99_ms"]
    assert case["p99_ms"] <= case["command_p99_ms"]
    assert case["suppressed"] == 0  # every injected XID went out as its own event
    assert case["sent"] >= 20


def test_soak_registers_short_lived_processes_and_samples_memory(
    report: dict[str, Any],
) -> None:
    (case,) = report["soak"]
    soak = plan.build(smoke=True).soak[0]
    # About one process a second came and went, and RSS was sampled through the run.
    assert case["processes"] >= soak.minutes * 60 * soak.per_second - 1
    assert len(case["rss_mib"]) >= soak.minutes * 60 / soak.rss_every_s
    assert all(mib > 0 for _, mib in case["rss_mib"])
    assert case["agent_alive"] is True


def test_events_are_written_ahead_and_timed(report: dict[str, Any]) -> None:
    (case,) = report["events"]
    assert case["wal_ms_per_event"] > 0  # every event was fsynced before its send
    assert case["wal_events_per_write"] >= 1


def test_xid_storm_counts_add_up(report: dict[str, Any]) -> None:
    (case,) = report["storm"]
    xids = plan.build(smoke=True).storm[0].xids
    assert case["xids"] == xids
    # Every injected XID was counted, and the storm's records account for each exactly once:
    # the first as itself, the rest in summaries, which the run summary calls suppressed.
    assert case["xids_counted"] == case["xids_in_records"] == xids
    assert case["suppressed"] == xids - 1
    assert case["first_is_single"] is True
    # Compressed: the first record, then at most one summary per window the storm spanned
    # (plus one for the window still open when it ended).
    assert 2 <= case["log_records"] <= 2 + case["accounted_s"] / case["storm_window_s"]
    assert 0 < case["first_record_ms"] <= case["accounted_s"] * 1000
    assert case["inject_per_s"] > 0
    assert case["other_gpus"] == case["gpus"] - 1
    assert case["max_gap_intervals"] > 0
    assert case["missed_cycles"] >= 0


def _ebpf_ran(report: dict[str, Any]) -> None:
    for skipped in report["skipped"]:
        pytest.skip(f"{skipped['case']} skipped: {skipped['reason']}")


def test_ebpf_call_cost_counted_every_traced_call(report: dict[str, Any]) -> None:
    _ebpf_ran(report)
    entries = [c["entry"] for c in report["ebpf_call_cost"]]
    assert sorted(entries) == ["endbr64", "nop"]
    for case in report["ebpf_call_cost"]:
        # The agent's exported launch count equals the calls made while traced.
        assert case["launches_counted"] == case["repetitions"] * case["calls_per_repetition"]
        assert case["uprobes_per_call"] == 2
        assert set(case["entry_instructions"].values()) == {case["entry"]}
        assert case["traced_ns_per_call"] > 0
        assert case["untraced_ns_per_call"] > 0


def test_ebpf_load_runs_with_the_plugin_off_and_on(report: dict[str, Any]) -> None:
    _ebpf_ran(report)
    (case,) = report["ebpf_load"]
    off, on = case["off"], case["on"]
    assert (off["plugin"], on["plugin"]) == ("off", "on")
    assert off["launches_counted"] is None
    assert on["launches_counted"] == on["launches_made"] > 0
    for run in (off, on):
        assert run["cycles"] >= 1
        assert run["launches_made"] > 0
        assert run["agent_peak_rss_mib"] > 0


def test_churn_and_cycle_costs_are_reported(report: dict[str, Any]) -> None:
    for case in report["churn"]:
        assert case["agent_alive"] is True
        assert case["execs_per_s"] > 0
    for case in report["agent"]:
        costs = case["costs"]
        # Every stage the agent clocks is reported, and the Python threads fit in the process.
        assert set(costs["stages_us"]) >= {"sampling", "snapshot", "series", "encoding",
                                           "sending", "self-telemetry", "attribution"}
        assert costs["stages_us"]["sampling"] > 0 and costs["stages_us"]["sending"] > 0
        assert 0 < sum(costs["threads_us"].values()) <= costs["process_us"] * 1.05


def test_fault_soak_accounts_for_every_xid(report: dict[str, Any]) -> None:
    """Even the smoke variant's few seconds of faults must lose nothing the agent observed."""
    assert report["faults"], "the fault soak did not run"
    for fault in report["faults"]:
        assert fault["xids_injected"] > 0
        assert fault["lost"] == 0, fault
        assert fault["xids_delivered"] >= fault["xids_injected"], fault


def test_hostile_peers_are_closed_and_probes_answered(report: dict[str, Any]) -> None:
    (case,) = report["hostile"]
    assert case["closed_by_server"] == case["waves"] * case["per_wave"]
    assert case["probes"] > 0 and case["scrapes"] > 0  # answered during the flood
    assert case["guesses_refused"] > 0 and case["exports_answered_big"] > 0
    assert case["peak_rss_mib"] >= case["baseline_rss_mib"] > 0


def test_nvml_chaos_counts_every_error_it_injected(report: dict[str, Any]) -> None:
    (case,) = report["chaos"]
    assert case["errors_injected"] > 0
    assert case["errors_counted"] == case["errors_injected"]  # the agent saw each one
    assert case["gpus_exporting"] == case["gpus"]  # no GPU dropped out under the errors
    assert case["samples_exported"] > 0 and case["samples_expected"] > 0
    assert case["agent_alive"] is True
