"""``gpu-agent capture``: the GPUs this node shows, in their vendor tool's capture format (entry
point of ``gpu_otel_agent.commands``). Only the arguments live here; the vendor's writer
(``CAPTURE_WRITERS`` of :mod:`.writers`) is imported when run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_otel_agent.extensions.commands import Commands

VENDORS = ("nvidia", "amd")


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
    parser.add_argument("--vendor", choices=VENDORS, default="nvidia",
                        help="whose GPUs (default: nvidia)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from gpu_otel_agent.plugins.capture.writers import NoCaptureWriter, capture_writer

    try:
        write = capture_writer(args.vendor)
    except NoCaptureWriter as error:
        print(f"gpu-agent capture: {error}", file=sys.stderr)
        return 2
    return write(args.out, keep_names=args.keep_names)
