"""The ``sim`` command group (entry-point group ``gpu_otel_agent.commands``, name ``sim``).

Every ``gpu-agent`` command builds the whole parser, so this module holds only the arguments:
the simulator (its C build, the node daemon, the control socket client) is imported by the
handler, when a ``sim`` command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from gpu_otel_agent.extensions.commands import CommandGroup, Commands

# The names of amdsmi's events; importing the binding loads no library (the node daemon does).
from gpu_otel_agent.simulation.amd.amdsmi_control import EVENT_TYPES as AMD_EVENT_TYPES
from gpu_otel_agent.simulation.operations import OPERATIONS, Device


def _handle(args: argparse.Namespace) -> int:
    from gpu_otel_agent.simulation.node import BuildError, ScenarioError
    from gpu_otel_agent.simulation.sim_runner import run

    try:
        return run(args)
    except (ScenarioError, BuildError) as error:
        print(f"gpu-agent: simulated node: {error}", file=sys.stderr)
        return 2


Parser = argparse.ArgumentParser
if TYPE_CHECKING:  # what add_subparsers() returns: subscriptable for the type checker only
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _sock(p: Parser) -> Parser:
    p.add_argument(
        "--socket",
        type=Path,
        default=None,
        help="control socket (default: $GPU_SIM_SOCKET or the `sim up` default)",
    )
    return p


def _node_commands(sub: Subparsers) -> None:
    up = sub.add_parser("up", help="run a simulated node in the foreground")
    up.add_argument("scenario", type=Path, nargs="?", default=None,
                    help="scenario YAML file (examples/scenarios/); optional with --capture")
    up.add_argument("--capture", type=Path, action="append", default=[], metavar="FILE",
                    help="serve the GPUs a real machine printed (nvidia-smi -q -x, "
                         "nvidia-smi -q, the nvidia-smi table, amd-smi --json; "
                         "examples/captures/), before the scenario's own; repeatable")
    up.add_argument("--dir", type=Path, default=None, help="state directory")
    _sock(up)
    _sock(sub.add_parser(
        "node", help="which simulated node the commands reach: its pid, scenario and control "
        "socket (every answer names it too)"))


def _device_commands(sub: Subparsers) -> None:
    xid = _sock(sub.add_parser("xid", help="queue an XID critical-error event"))
    xid.add_argument("--code", type=int, required=True, help="XID code")
    xid.add_argument("--mig", type=int, default=None,
                     help="scope it to this MIG instance (position in the device's list)")
    xid.add_argument("--ci", type=int, default=None,
                     help="and to this compute instance of it (position in its list)")
    mig = _sock(sub.add_parser("mig", help="reconfigure a MIG-enabled GPU's instances"))
    mig.add_argument("--set", required=True, metavar="PROFILES",
                     help="the GPU instances it should have, e.g. 3g.40gb,1g.10gb,1g.10gb "
                          "(instances not listed are destroyed; '' destroys all)")
    _sock(sub.add_parser(
        "recovery", help="the driver asks for a recovery action (field + event, as nvml.h)"
    )).add_argument("--action", type=int, required=True, choices=range(8),
                    help="nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node reboot, "
                         "3 drain P2P, 4 drain and reset, 5 recover IMEX domain, 6 bus reset, "
                         "7 system reboot")
    ecc = _sock(sub.add_parser("ecc", help="ECC error event + counter increment"))
    ecc.add_argument("--type", choices=("single_bit", "double_bit"), default="single_bit",
                     help="single_bit (corrected) or double_bit (uncorrected)")
    ecc.add_argument("--mig", type=int, default=None,
                     help="an SRAM error of this MIG instance (double_bit; position in the "
                          "device's list)")
    ecc.add_argument("--ci", type=int, default=None,
                     help="on this compute instance of it (position in its list)")
    _sock(sub.add_parser("lost", help="the GPU falls off the bus (GPU_IS_LOST) until sim "
                                      "recover"))
    _sock(sub.add_parser("recover", help="the GPU is back; the agent finds out at its next "
                                         "re-probe of the lost GPU, up to lost_reprobe_interval "
                                         "(30 s by default) later"))
    _sock(sub.add_parser("hang", help="every call on the device blocks --ms from now on, "
                                      "until sim hang --ms 0")).add_argument(
        "--ms", type=int, required=True,
        help="how long each call blocks (ms); 0 ends the hang"
    )
    st = _sock(
        sub.add_parser("set", help="change readings: NAME=VALUE ... (VALUE null = unsupported)")
    )
    st.add_argument("assignments", nargs="+", metavar="NAME=VALUE",
                    help="scenario reading and its new value (JSON; null = unsupported)")


def _process_commands(sub: Subparsers) -> Subparsers:
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
    padd.add_argument("--mig", type=int, default=None,
                      help="run it on this MIG instance (position in the device's list)")
    padd.add_argument("--ci", type=int, default=None,
                      help="on this compute instance of it (position in its list)")
    prm = _sock(psub.add_parser("rm", help="remove a GPU process"))
    prm.add_argument("--pid", type=int, required=True, help="process id to remove")
    return psub


def _amd_commands(sub: Subparsers) -> None:
    ev = _sock(sub.add_parser("event", help="queue an amdsmi event notification (AMD GPU)"))
    ev.add_argument("--type", required=True, choices=tuple(AMD_EVENT_TYPES),
                    help="amdsmi event type")
    ev.add_argument("--message", default="", help="the notification's message text")
    rst = _sock(sub.add_parser(
        "reset", help="GPU reset. NVIDIA: volatile ECC, energy and PCIe/NVLink byte counters "
        "and the GPU uptime restart, RESET_REQUIRED clears. AMD: pre-reset event, calls fail "
        "for --ms, post-reset event"
    ))
    rst.add_argument("--ms", type=int, default=1000, help="how long an AMD reset lasts (ms)")
    rst.add_argument("--errno", choices=("EPERM", "EBUSY"), default="EPERM",
                     help="AMD: what amdgpu answers sysfs reads during the reset: EPERM (older "
                          "kernels; amdsmi says NOT_SUPPORTED) or EBUSY (amdsmi says BUSY)")


def _fault_commands(sub: Subparsers) -> Parser:
    chaos = _sock(sub.add_parser(
        "chaos", help="random NVML errors (codes nvml.h documents per function) and slow calls"
    ))
    chaos.add_argument("--rate", type=float, help="probability that a call fails (0..1)")
    chaos.add_argument("--seed", type=int, default=0, help="same seed + same calls = same faults")
    chaos.add_argument("--functions", default="all", help="'all' or comma-separated NVML names")
    chaos.add_argument("--codes", default="documented",
                       help="'documented' (nvml.h @return) or comma-separated codes (999, UNKNOWN)")
    chaos.add_argument("--devices", default="all", help="'all' or comma-separated indices")
    chaos.add_argument("--slow-rate", type=float, default=0.0,
                       help="probability that a call that did not fail is slow (0..1)")
    chaos.add_argument("--slow-ms", type=int, default=0, help="how long a slow call takes (ms)")
    chaos.add_argument("--off", action="store_true", help="stop random chaos")
    fail = _sock(sub.add_parser(
        "fail", help="targeted fault: calls of a function (or one field) return a code"
    ))
    fail.add_argument("--device", type=int, default=None, help="device index (default: every)")
    fail.add_argument("--function", default=None,
                      help="NVML function name (default: every function)")
    fail.add_argument("--code", default=None,
                      help="nvmlReturn_t value or name (999, NVML_ERROR_UNKNOWN, TIMEOUT)")
    fail.add_argument("--count", type=int, default=None,
                      help="fail this many calls, then answer normally (default: until --off)")
    fail.add_argument("--field", type=int, default=None,
                      help="nvmlDeviceGetFieldValues field id: only that field's nvmlReturn")
    fail.add_argument("--off", action="store_true",
                      help="clear the faults matching the given keys (none given: all)")
    _sock(sub.add_parser(
        "driver-reload", help="driver reload: clients answer UNINITIALIZED until they nvmlInit "
        "again; volatile counters and uptime restart on every GPU"
    ))
    rr = _sock(sub.add_parser(
        "reset-required", help="device calls answer NVML_ERROR_RESET_REQUIRED until `sim reset`"
    ))
    rr.add_argument("--off", action="store_true", help="clear the state without a reset")
    return fail


def _fabric_commands(sub: Subparsers) -> None:
    fab = _sock(sub.add_parser(
        "fabric", help="the GPU fabric probe (nvmlDeviceGetGpuFabricInfoV): state, clique, health"
    ))
    fab.add_argument("--state", choices=("not_supported", "not_started", "in_progress",
                                         "completed"), default=None, help="probe state")
    fab.add_argument("--status", type=int, default=None,
                     help="the probe's nvmlReturn_t (0 success; read only when completed)")
    fab.add_argument("--clique-id", type=int, default=None, help="fabric clique id")
    fab.add_argument("--cluster-uuid", default=None, help="cluster UUID")
    fab.add_argument("--summary", choices=("not_supported", "healthy", "unhealthy",
                                           "limited_capacity"), default=None,
                     help="health summary (v3 struct)")
    fab.add_argument("--health", action="append", default=[], metavar="FIELD=VALUE",
                     help="a health-mask field: degraded_bandwidth, route_recovery, "
                          "route_unhealthy, access_timeout_recovery (true/false), "
                          "incorrect_configuration (none, insufficient_nvlinks, ...), "
                          "partition_assigned, gfm (connected/disconnected); repeatable")
    _sock(sub.add_parser("stats", help="NVML and amdsmi call counts per function and device"))


def _device_arguments(sub: Subparsers, psub: Subparsers, fail: Parser) -> None:
    """--device on every command whose operation names one (``operations.OPERATIONS``)."""
    for operation in OPERATIONS:  # --device, as the operation's row says
        if operation.command is None or operation.device is Device.NONE:
            continue
        command, _, second = operation.command.partition(" ")
        target = psub.choices[second] if second else sub.choices[command]
        if target is fail:
            continue  # has its own, first among its arguments
        if operation.device is Device.REQUIRED:
            target.add_argument("--device", type=int, required=True, help="device index")
        else:
            target.add_argument("--device", type=int, default=None,
                                help="device index (default: every device)")


def add_sim_commands(subparsers: Commands) -> argparse.ArgumentParser:
    """Register ``sim`` and its sub-commands on an argparse ``add_subparsers()`` object.

    The parser defaults ``func`` and ``handler`` to a function that runs the parsed command
    (:func:`gpu_otel_agent.simulation.sim_runner.run`) and returns the exit code.
    """
    sim = subparsers.add_parser("sim", help="simulated GPU node (no GPU needed)")
    sim.set_defaults(func=_handle, handler=_handle)
    sub = sim.add_subparsers(dest="sim_cmd", required=True)
    _node_commands(sub)
    _device_commands(sub)
    psub = _process_commands(sub)
    _amd_commands(sub)
    fail = _fault_commands(sub)
    _fabric_commands(sub)
    _device_arguments(sub, psub, fail)
    parser: argparse.ArgumentParser = sim
    return parser


_GROUP: CommandGroup = add_sim_commands  # mypy checks it against the core's Protocol


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry (``python -m gpu_otel_agent.simulation.sim_commands sim ...``): the
    ``sim`` commands without the agent's other commands (tests drive a node this way)."""
    parser = argparse.ArgumentParser(prog="gpu-agent")
    add_sim_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
