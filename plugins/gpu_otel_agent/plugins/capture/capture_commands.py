"""``gpu-agent capture``: the GPUs this node shows, in their vendor tool's capture format (entry
point of ``gpu_otel_agent.commands``). Only the arguments live here; the vendor's writer (an
entry point of ``gpu_otel_agent.capture_writers``, declared by the vendor's plugin) is loaded when
run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_otel_agent.extensions.capture import (
    NoCaptureWriter,
    capture_vendors,
    capture_writer,
)
from gpu_otel_agent.extensions.commands import Commands


def add_capture_commands(commands: Commands) -> None:
    parser = commands.add_parser(
        "capture",
        help="write the GPUs this node shows in their vendor tool's format (nvidia-smi -q -x "
             "for NVIDIA), for bug reports; gpu-agent sim up --capture FILE replays it",
        description="Reads every GPU through the vendor library (a real driver, or a simulated "
                    "node attached with the environment `gpu-agent sim up` prints) and writes "
                    "what the vendor tool would (NVIDIA: nvidia-smi -q -x). Process names are "
                    "replaced by [scrubbed] unless --keep-names; no host names or command "
                    "lines are written.",
    )
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="write here (default: standard output)")
    parser.add_argument("--keep-names", action="store_true",
                        help="keep process names (they may say what runs on the node)")
    parser.add_argument("--vendor", choices=capture_vendors(), default="nvidia",
                        help="whose GPUs (default: nvidia)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        write = capture_writer(args.vendor)
    except NoCaptureWriter as error:
        print(f"gpu-agent capture: {error}", file=sys.stderr)
        return 2
    return write(args.out, keep_names=args.keep_names)
