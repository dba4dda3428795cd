"""``gpu-agent capture``: the node the agent sees, as ``nvidia-smi -q -x`` (entry point of
``gpu_otel_agent.commands``). Only the arguments live here; the writer is imported when run."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_otel_agent.extensions.commands import Commands


def add_capture_commands(commands: Commands) -> None:
    parser = commands.add_parser(
        "capture",
        help="write the NVIDIA GPUs this node shows as nvidia-smi -q -x XML (for bug reports; "
             "gpu-agent sim up --capture FILE replays it)",
        description="Reads every NVIDIA GPU through NVML (a real driver, or a simulated node "
                    "attached with the environment `gpu-agent sim up` prints) and writes "
                    "what nvidia-smi -q -x would. Process names are replaced by [scrubbed] "
                    "unless --keep-names; the format has no host names or command lines.",
    )
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="write here (default: standard output)")
    parser.add_argument("--keep-names", action="store_true",
                        help="keep process names (they may say what runs on the node)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from gpu_otel_agent.plugins.nvidia.capture.command import run

    return run(args.out, keep_names=args.keep_names)
