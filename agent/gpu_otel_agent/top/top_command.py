"""``gpu-agent top``: its arguments; running it is ``top_run``'s.

The terminal library and the screen are imported only when a live screen is drawn, and the
rest of top (its sources, http.client, the renderer) only when top runs, so this module costs
the rest of the CLI (and the agent) nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_otel_agent.local.arguments import add_endpoint_arguments
from gpu_otel_agent.top.view import SORTS


def add_top(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    top = commands.add_parser(
        "top", help="live view of the GPUs, their processes and pods, and health events",
        description="Attached to the agent running on this machine (its local endpoint, "
        "read-only). Where none answers, standalone: an agent of its own samples this node's "
        "GPUs (or the simulated node whose GPU_SIM_* environment is set), exporting and "
        "writing nothing; with --simulate, a simulated node of its own. The title says which. "
        "Keys: s sort, / filter (pod:NAME ns:NAME gpu:N), Esc clear filter, p pause, q quit.")
    top.add_argument("--simulate", type=Path, metavar="SCENARIO",
                     help="run an agent of its own on the simulated node of SCENARIO (a file, "
                     "or a scenario shipped with the simulated node by name: h100-8gpu)")
    add_endpoint_arguments(top)
    top.add_argument("--once", action="store_true",
                     help="print one plain-text snapshot and exit (the default without a "
                     "terminal)")
    top.add_argument("--json", action="store_true",
                     help="print the agent's snapshot and recent events as JSON and exit")
    # Not --interval: in `run` that is the fast group's sampling interval; the screen's
    # refresh is another thing (an attached top cannot change the agent's sampling).
    top.add_argument("--refresh", type=float, default=1.0, metavar="SECONDS",
                     help="seconds between screen refreshes (default: 1)")
    top.add_argument("--sort", choices=SORTS, default="memory", help="process order")
    top.add_argument("--filter", default="", metavar="FILTER",
                     help="show only these: pod:NAME ns:NAME gpu:N or words")
    top.set_defaults(handler=run_top)


def run_top(args: argparse.Namespace) -> int:
    from gpu_otel_agent.top.top_run import run

    return run(args)
