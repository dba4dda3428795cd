"""``gpu-agent sim ...``: bring a simulated node up and drive it from the shell.

The arguments are defined in :mod:`gpu_otel_agent.simulation.sim_commands` (imported by every
``gpu-agent`` command); this module runs a parsed command, and imports nothing of that one (its
handler imports this, when a ``sim`` command runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from gpu_otel_agent.simulation.node.control_client import (
    default_socket_path,
    default_state_dir,
    send,
)


def _value(text: str) -> object:
    if text.lower() in ("null", "none"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _mig_scope(args: argparse.Namespace) -> dict[str, object]:
    """``--mig`` / ``--ci``: the MIG instance (and compute instance) a request names."""
    return {key: getattr(args, key) for key in ("mig", "ci")
            if getattr(args, key, None) is not None}


def _request(args: argparse.Namespace) -> dict[str, object]:
    cmd = args.sim_cmd
    if cmd == "xid":
        return {"op": "xid", "device": args.device, "code": args.code, **_mig_scope(args)}
    if cmd == "mig":
        return {"op": "mig", "device": args.device, "set": args.set}
    if cmd == "recovery":
        return {"op": "recovery", "device": args.device, "action": args.action}
    if cmd == "ecc":
        return {"op": "ecc", "device": args.device, "type": args.type, **_mig_scope(args)}
    if cmd in ("lost", "recover"):
        return {"op": cmd, "device": args.device}
    if cmd == "hang":
        return {"op": "hang", "device": args.device, "ms": args.ms}
    if cmd == "event":
        return {"op": "event", "device": args.device, "type": args.type, "message": args.message}
    if cmd == "reset":
        return {"op": "reset", "device": args.device, "ms": args.ms, "errno": args.errno}
    if cmd == "fabric":
        entry: dict[str, object] = {k: v for k, v in (
            ("state", args.state), ("status", args.status), ("clique_id", args.clique_id),
            ("cluster_uuid", args.cluster_uuid), ("summary", args.summary)) if v is not None}
        health: dict[str, object] = {}
        for a in args.health:
            name, sep, val = a.partition("=")
            if not sep or not name:
                raise ValueError(f"expected FIELD=VALUE, got {a!r}")
            health[name] = val
        if health:
            entry["health"] = health
        return {"op": "fabric", "device": args.device, "fabric": entry}
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
            **_mig_scope(args),
        }
    if cmd == "proc" and args.proc_cmd == "rm":
        req: dict[str, object] = {"op": "proc_rm", "pid": args.pid}
        if args.device is not None:
            req["device"] = args.device
        return req
    if cmd == "stats":
        return {"op": "stats"}
    if cmd == "node":
        return {"op": "node"}
    if cmd == "chaos":
        if args.off:
            return {"op": "chaos", "off": True}
        if args.rate is None:
            raise ValueError("--rate is required (or --off)")
        return {
            "op": "chaos", "rate": args.rate, "seed": args.seed, "functions": args.functions,
            "codes": args.codes, "devices": args.devices,
            "slow_ms": {"rate": args.slow_rate, "ms": args.slow_ms},
        }
    if cmd == "fail":
        req = {"op": "fail", "device": args.device, "function": args.function}
        for key in ("count", "field"):
            if getattr(args, key) is not None:
                req[key] = getattr(args, key)
        if args.off:
            req["off"] = True
        elif args.code is None:
            raise ValueError("--code is required (or --off)")
        else:
            req["code"] = int(args.code) if args.code.isdigit() else args.code
        return req
    if cmd == "driver-reload":
        return {"op": "driver_reload"}
    if cmd == "reset-required":
        return {"op": "reset_required", "device": args.device, "on": not args.off}
    raise ValueError(f"unknown sim command {cmd!r}")


def _up(args: argparse.Namespace) -> int:
    from gpu_otel_agent.simulation.node import daemon

    state_dir = args.dir or default_state_dir()
    if args.scenario is None and not args.capture:
        print("gpu-agent sim up: give a scenario file, --capture FILE, or both", file=sys.stderr)
        return 2
    argv = [str(args.scenario)] if args.scenario is not None else []
    argv += ["--dir", str(state_dir)]
    for capture in args.capture:
        argv += ["--capture", str(capture.resolve())]
    if args.dir is None:  # the default directory may belong to a running node: pick a free one
        argv.append("--pick-free")
    sock = args.socket or (
        Path(os.environ["GPU_SIM_SOCKET"]) if os.environ.get("GPU_SIM_SOCKET") else None
    )
    if sock is not None:
        argv += ["--socket", str(sock)]
    return daemon.main(argv)


def _nobody(socket_path: Path, error: OSError) -> str:
    """Why no node answered: nothing there, or a socket (or link) its node left behind."""
    if isinstance(error, ConnectionRefusedError):
        return (f"the control socket {socket_path} is stale: the node that made it is gone "
                f"(nothing listens; the next node there replaces it)")
    if socket_path.is_symlink():
        return (f"{socket_path} links to {os.readlink(socket_path)}, which is gone: its node "
                f"has stopped")
    return f"no simulated node at {socket_path}"


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``sim`` command: the node's JSON answer on stdout, or one error line
    on stderr; returns the exit code."""
    if args.sim_cmd == "up":
        return _up(args)
    socket_path = args.socket or default_socket_path()
    try:
        req = _request(args)
        reply = send(socket_path, req)
    except (FileNotFoundError, ConnectionRefusedError) as error:
        # Once, on stderr: an error is for a person; stdout carries the node's JSON answers.
        print(f"gpu-agent sim: {_nobody(socket_path, error)}: start one with gpu-agent sim up "
              f"SCENARIO (it prints the GPU_SIM_SOCKET to use), or name a running node's "
              f"socket with --socket", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"gpu-agent sim: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"gpu-agent sim: {reply.get('error')}", file=sys.stderr)
        return 1
    print(json.dumps(reply))
    return 0
