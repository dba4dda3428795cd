"""``gpu-agent check``: runs every check of a configuration at once, each under a deadline,
and prints one line per check (or ``--json``).

Exit status: 0 when nothing failed (warnings allowed), 1 when a check failed, 2 when the checks
could not run (a bad configuration, a scenario that does not load). The checks run in parallel
on daemon threads, so the whole run is bounded by the longest deadline even when a GPU library
or the kubelet hangs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gpu_otel_agent.check.result import Result, Status, failed
from gpu_otel_agent.config.load import ConfigError, Overrides, load
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.extensions.simulation import SimulatedNodeError, simulated_node

Check = Callable[[AgentConfig], list[Result]]


def _checks(config: AgentConfig) -> list[tuple[str, Check, float]]:
    """Name (for a check that times out), check, deadline in seconds."""
    # Imported here: every command builds the whole parser, only `check` runs the checks.
    from gpu_otel_agent.check import export, host

    return [
        ("gpus", host.gpus, max(config.call_timeout * 4, 8.0)),
        ("host pid namespace", host.host_pid_namespace, 2.0),
        ("cgroup layout", host.cgroups, 2.0),
        ("kubelet pod-resources", host.kubelet, config.attribution.kubelet.timeout + 1.0),
        ("kernel log", host.kmsg, 2.0),
        ("process events", host.process_events, 3.0),
        ("ebpf", host.ebpf, 2.0),
        ("event spool", host.spool, 3.0),
        ("prometheus listen", host.prometheus_port, 2.0),
        ("running agent", host.running_agent, 3.0),
        ("collector", export.collector, 2 * export.DEFAULT_TIMEOUT_S + 1.0),
    ]


def add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser(
        "check", help="check every prerequisite of a configuration, with a test export",
        description="One line per check: pass, warn (the agent runs with less) or fail (with "
        "what to do). Exit status 0: no failure, 1: a check failed, 2: could not run.")
    check.add_argument("--config", type=Path, metavar="FILE", help="YAML configuration file")
    check.add_argument("--simulate", type=Path, metavar="SCENARIO",
                       help="check against the simulated node of SCENARIO")
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.set_defaults(handler=run_check)


def run(config: AgentConfig) -> list[Result]:
    """Every check, in parallel, each bounded by its deadline; results in the checks' order."""
    started = time.monotonic()
    slots: list[list[Result] | None] = []
    threads = []
    for index, (_, check, _) in enumerate(checks := _checks(config)):
        slots.append(None)

        def work(index: int = index, check: Check = check) -> None:
            begin = time.monotonic()
            try:
                found = check(config)
            except Exception as error:  # a check's own bug must not hide the others
                found = [failed(checks[index][0], f"the check crashed: {type(error).__name__}:"
                                f" {error}", "report this as a bug of gpu-agent check")]
            seconds = time.monotonic() - begin
            slots[index] = [Result(r.name, r.status, r.detail, r.fix, seconds) for r in found]

        thread = threading.Thread(target=work, name=f"check-{index}", daemon=True)
        thread.start()
        threads.append(thread)
    results: list[Result] = []
    for (name, _, deadline), thread, index in zip(checks, threads, range(len(checks)),
                                                  strict=True):
        thread.join(max(started + deadline - time.monotonic(), 0.0))
        found = slots[index]
        if found is None:
            results.append(failed(name, f"no answer within {deadline:g}s",
                                  "something hangs: see the agent's log for the same "
                                  "component", ))
        else:
            results.extend(found)
    return results


def exit_code(results: list[Result]) -> int:
    return 1 if any(r.status is Status.FAIL for r in results) else 0


def run_check(args: argparse.Namespace) -> int:
    # The checks say what they found; the libraries' own warnings would only repeat it.
    logging.basicConfig(level=logging.CRITICAL)
    try:
        config = load(args.config, Overrides())
        with simulated_node(args.simulate) as paths:
            if args.simulate is not None:  # the node's attach environment counts (its kubelet)
                config = paths.apply(load(args.config, Overrides()))
            results = run(config)
    except ConfigError as error:
        print(f"gpu-agent check: configuration error: {error}", file=sys.stderr)
        return 2
    except SimulatedNodeError as error:
        print(f"gpu-agent check: simulated node: {error}", file=sys.stderr)
        return 2
    code = exit_code(results)
    if args.json:
        counts = {s.value: sum(r.status is s for r in results) for s in Status}
        json.dump({"checks": [r.document() for r in results], "summary": counts,
                   "exit": code}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for result in results:
            print(result.line())
        counts_text = ", ".join(f"{sum(r.status is s for r in results)} {s.value}"
                                for s in Status)
        print(f"{counts_text}: {'FAILED' if code else 'ok'}")
    return code
