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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from gpu_otel_agent.simulation.node.control_client import (
    default_socket_path,
    default_state_dir,
    send,
)
from gpu_otel_agent.simulation.operations import BY_COMMAND, Device


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


def _pairs(items: list[str], what: str) -> Iterator[tuple[str, str]]:
    for a in items:
        name, sep, val = a.partition("=")
        if not sep or not name:
            raise ValueError(f"expected {what}=VALUE, got {a!r}")
        yield name, val


def _fabric(args: argparse.Namespace) -> dict[str, object]:
    entry: dict[str, object] = {k: v for k, v in (
        ("state", args.state), ("status", args.status), ("clique_id", args.clique_id),
        ("cluster_uuid", args.cluster_uuid), ("summary", args.summary)) if v is not None}
    health: dict[str, object] = dict(_pairs(args.health, "FIELD"))
    if health:
        entry["health"] = health
    return {"fabric": entry}


def _set(args: argparse.Namespace) -> dict[str, object]:
    return {"values": {name: _value(val) for name, val in _pairs(args.assignments, "NAME")}}


def _proc_add(args: argparse.Namespace) -> dict[str, object]:
    return {"pid": args.pid, "used_memory_mib": args.memory_mib, "sm_util": args.sm_util,
            "mem_util": args.mem_util, "type": args.type, **_mig_scope(args)}


def _proc_rm(args: argparse.Namespace) -> dict[str, object]:
    return {"pid": args.pid}


def _chaos(args: argparse.Namespace) -> dict[str, object]:
    if args.off:
        return {"off": True}
    if args.rate is None:
        raise ValueError("--rate is required (or --off)")
    return {"rate": args.rate, "seed": args.seed, "functions": args.functions,
            "codes": args.codes, "devices": args.devices,
            "slow_ms": {"rate": args.slow_rate, "ms": args.slow_ms}}


def _fail(args: argparse.Namespace) -> dict[str, object]:
    req: dict[str, object] = {"function": args.function}
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


def _none(args: argparse.Namespace) -> dict[str, object]:
    return {}


# A parsed command's request body (less ``op`` and ``device``), by operation
# (``operations.OPERATIONS``: its rows with a command).
REQUESTS: Mapping[str, Callable[[argparse.Namespace], dict[str, object]]] = {
    "xid": lambda args: {"code": args.code, **_mig_scope(args)},
    "ecc": lambda args: {"type": args.type, **_mig_scope(args)},
    "lost": _none,
    "recover": _none,
    "hang": lambda args: {"ms": args.ms},
    "set": _set,
    "proc_add": _proc_add,
    "proc_rm": _proc_rm,
    "event": lambda args: {"type": args.type, "message": args.message},
    "reset": lambda args: {"ms": args.ms, "errno": args.errno},
    "recovery": lambda args: {"action": args.action},
    "chaos": _chaos,
    "fail": _fail,
    "driver_reload": _none,
    "reset_required": lambda args: {"on": not args.off},
    "fabric": _fabric,
    "mig": lambda args: {"set": args.set},
    "stats": _none,
    "node": _none,
}


def _request(args: argparse.Namespace) -> dict[str, object]:
    command = args.sim_cmd if args.sim_cmd != "proc" else f"proc {args.proc_cmd}"
    operation = BY_COMMAND.get(command)
    if operation is None:
        raise ValueError(f"unknown sim command {args.sim_cmd!r}")
    req: dict[str, object] = {"op": operation.name}
    if operation.device is not Device.NONE:  # null: every device
        req["device"] = args.device
    return {**req, **REQUESTS[operation.name](args)}


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
