"""``gpu-agent sim ...``: bring a simulated node up and drive it from the shell."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_otel_agent.plugins.amd.simulator import _lib as amd_lib
from gpu_otel_agent.plugins.nvidia.simulator.control import (
    default_socket_path,
    default_state_dir,
    send,
)


def add_sim_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``sim`` and its sub-commands on an argparse ``add_subparsers()`` object.

    The parser defaults ``func`` and ``handler`` to :func:`run`, which returns the exit code.
    """
    sim = subparsers.add_parser("sim", help="simulated GPU node (no GPU needed)")
    sim.set_defaults(func=run, handler=run)
    sub = sim.add_subparsers(dest="sim_cmd", required=True)

    def _sock(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--socket",
            type=Path,
            default=None,
            help="control socket (default: $GPU_SIM_SOCKET or the `sim up` default)",
        )
        return p

    up = sub.add_parser("up", help="run a simulated node in the foreground")
    up.add_argument("scenario", type=Path, help="scenario YAML file (examples/scenarios/)")
    up.add_argument("--dir", type=Path, default=None, help="state directory")
    _sock(up)
    _sock(sub.add_parser("xid", help="queue an XID critical-error event")).add_argument(
        "--code", type=int, required=True, help="XID code"
    )
    ecc = _sock(sub.add_parser("ecc", help="ECC error event + counter increment"))
    ecc.add_argument("--type", choices=("single_bit", "double_bit"), default="single_bit",
                     help="single_bit (corrected) or double_bit (uncorrected)")
    _sock(sub.add_parser("lost", help="the GPU falls off the bus (GPU_IS_LOST)"))
    _sock(sub.add_parser("recover", help="the GPU is back"))
    _sock(sub.add_parser("hang", help="calls on the device block")).add_argument(
        "--ms", type=int, required=True, help="how long each call blocks (ms)"
    )
    st = _sock(
        sub.add_parser("set", help="change readings: NAME=VALUE ... (VALUE null = unsupported)")
    )
    st.add_argument("assignments", nargs="+", metavar="NAME=VALUE",
                    help="scenario reading and its new value (JSON; null = unsupported)")
    proc = sub.add_parser("proc", help="GPU processes")
    psub = proc.add_subparsers(dest="proc_cmd", required=True)
    padd = _sock(psub.add_parser("add", help="add a GPU process"))
    padd.add_argument("--pid", type=int, required=True, help="process id NVML reports")
    padd.add_argument("--memory-mib", type=float, default=0.0, help="used GPU memory (MiB)")
    padd.add_argument("--sm-util", type=float, default=0.0, help="SM utilization (%%)")
    padd.add_argument("--mem-util", type=float, default=0.0,
                      help="memory controller utilization (%%)")
    padd.add_argument("--type", choices=("compute", "graphics", "mps"), default="compute",
                      help="NVML process list the process is in")
    prm = _sock(psub.add_parser("rm", help="remove a GPU process"))
    prm.add_argument("--pid", type=int, required=True, help="process id to remove")
    ev = _sock(sub.add_parser("event", help="queue an amdsmi event notification (AMD GPU)"))
    ev.add_argument("--type", required=True, choices=tuple(amd_lib.EVENT_TYPES),
                    help="amdsmi event type")
    ev.add_argument("--message", default="", help="the notification's message text")
    _sock(sub.add_parser(
        "reset", help="AMD GPU reset: pre-reset event, calls fail for --ms, post-reset event"
    )).add_argument("--ms", type=int, default=1000, help="how long the reset lasts (ms)")
    _sock(sub.add_parser("stats", help="NVML and amdsmi call counts per function and device"))
    for name in ("xid", "ecc", "lost", "recover", "hang", "set", "event", "reset"):
        sub.choices[name].add_argument("--device", type=int, required=True,
                                       help="device index")
    padd.add_argument("--device", type=int, required=True, help="device index")
    prm.add_argument("--device", type=int, default=None,
                     help="device index (default: every device)")
    parser: argparse.ArgumentParser = sim
    return parser


def _value(text: str) -> object:
    if text.lower() in ("null", "none"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _request(args: argparse.Namespace) -> dict[str, object]:
    cmd = args.sim_cmd
    if cmd == "xid":
        return {"op": "xid", "device": args.device, "code": args.code}
    if cmd == "ecc":
        return {"op": "ecc", "device": args.device, "type": args.type}
    if cmd in ("lost", "recover"):
        return {"op": cmd, "device": args.device}
    if cmd == "hang":
        return {"op": "hang", "device": args.device, "ms": args.ms}
    if cmd == "event":
        return {"op": "event", "device": args.device, "type": args.type, "message": args.message}
    if cmd == "reset":
        return {"op": "reset", "device": args.device, "ms": args.ms}
    if cmd == "set":
        values: dict[str, object] = {}
        for a in args.assignments:
            name, sep, val = a.partition("=")
            if not sep or not name:
                raise ValueError(f"expected NAME=VALUE, got {a!r}")
            values[name] = _value(val)
        return {"op": "set", "device": args.device, "values": values}
    if cmd == "proc" and args.proc_cmd == "add":
        return {
            "op": "proc_add",
            "device": args.device,
            "pid": args.pid,
            "used_memory_mib": args.memory_mib,
            "sm_util": args.sm_util,
            "mem_util": args.mem_util,
            "type": args.type,
        }
    if cmd == "proc" and args.proc_cmd == "rm":
        req: dict[str, object] = {"op": "proc_rm", "pid": args.pid}
        if args.device is not None:
            req["device"] = args.device
        return req
    if cmd == "stats":
        return {"op": "stats"}
    raise ValueError(f"unknown sim command {cmd!r}")


def _up(args: argparse.Namespace) -> int:
    from gpu_otel_agent.plugins.nvidia.simulator import node

    state_dir = args.dir or default_state_dir()
    argv = [str(args.scenario), "--dir", str(state_dir)]
    sock = args.socket or (
        Path(os.environ["GPU_SIM_SOCKET"]) if os.environ.get("GPU_SIM_SOCKET") else None
    )
    if sock is not None:
        argv += ["--socket", str(sock)]
    return node.main(argv)


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``sim`` command; prints one JSON line; returns the exit code."""
    if args.sim_cmd == "up":
        return _up(args)
    try:
        req = _request(args)
        reply = send(args.socket or default_socket_path(), req)
    except (OSError, ValueError) as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))
        print(f"gpu-agent sim: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(reply))
    if not reply.get("ok"):
        print(f"gpu-agent sim: {reply.get('error')}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry (``python -m gpu_otel_agent.plugins.nvidia.simulator.cli sim ...``)."""
    parser = argparse.ArgumentParser(prog="gpu-agent")
    add_sim_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
