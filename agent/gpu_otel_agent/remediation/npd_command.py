"""``gpu-agent npd``: a Node Problem Detector custom plugin answered from the running agent.

One GET of ``/v1/health`` on the agent's local endpoint (no GPU library call, no agent of its
own): fast enough for NPD's default 5 s plugin timeout on a node with a hung GPU, since the
agent's state, not the GPU, answers.
"""

from __future__ import annotations

import argparse

from gpu_otel_agent.gpu_health.subsystems import SUBSYSTEMS
from gpu_otel_agent.local.arguments import add_endpoint_arguments, endpoint_path
from gpu_otel_agent.remediation.npd import NPD_MAX_OUTPUT, UNKNOWN, Answer, answer


def add_npd(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    npd = commands.add_parser(
        "npd", help="answer Node Problem Detector's custom-plugin protocol from the agent",
        description="Exit 0 when every GPU is healthy in the chosen subsystems, 1 when one is "
        "degraded (or failed, with --at-least failed), 2 when the agent cannot tell; one line "
        "on stdout for the node condition's message.")
    npd.add_argument("--subsystem", action="append", choices=SUBSYSTEMS, metavar="NAME",
                     help=f"judge only this subsystem (repeatable; default: all of "
                     f"{', '.join(SUBSYSTEMS)})")
    npd.add_argument("--at-least", choices=("degraded", "failed"), default="degraded",
                     help="the state that makes the answer NonOK (default: degraded)")
    npd.add_argument("--max-length", type=int, default=NPD_MAX_OUTPUT, metavar="BYTES",
                     help="longest message (NPD's max_output_length; default: 80)")
    add_endpoint_arguments(npd)
    npd.add_argument("--timeout", type=float, default=3.0, metavar="SECONDS",
                     help="how long to wait for the agent (default: 3, under NPD's 5 s)")
    npd.set_defaults(handler=run_npd)


def run_npd(args: argparse.Namespace) -> int:
    # Imported by the command, not by ``gpu-agent run``'s parser: http.client and its
    # helpers are 0.2 MiB of the running agent's memory (issue 41).
    from gpu_otel_agent.local.client import LocalClientError, get

    try:
        path = endpoint_path(args)
        result = answer(get(path, "/v1/health", timeout=args.timeout),
                        tuple(args.subsystem or SUBSYSTEMS), args.at_least, args.max_length)
    except LocalClientError as error:
        result = Answer(UNKNOWN, f"gpu-otel-agent: {error}"[:max(args.max_length, 0)])
    except Exception as error:  # NPD must get an answer, not a traceback: Unknown with why
        result = Answer(UNKNOWN, f"gpu-agent npd: {type(error).__name__}: {error}"
                        [:max(args.max_length, 0)])
    print(result.message)
    return result.code
