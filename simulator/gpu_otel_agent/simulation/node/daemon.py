"""The simulated node daemon: owns the state file, plays the scenario, serves control.

Run as ``python -m gpu_otel_agent.simulation.node.daemon SCENARIO --dir DIR``.  When ready it
prints one JSON line (``{"ready": true, ...}``) followed by the shell lines that attach
another client.  The tick thread (10 Hz) evaluates patterns, plays the timeline and
integrates counters; its CPU is the node's, not the agent's.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import logging
import math
import os
import random
import signal
import socketserver
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NamedTuple

from gpu_otel_agent import unix_socket
from gpu_otel_agent.simulation.amd import amdsmi_control as amd_lib
from gpu_otel_agent.simulation.amd import models as amd_models
from gpu_otel_agent.simulation.amd import partitions as amd_partitions
from gpu_otel_agent.simulation.amd import scenario as amd_scenario
from gpu_otel_agent.simulation.amd.build_amdsmi import build_library as build_amd_library
from gpu_otel_agent.simulation.captures.registry import not_served_lines
from gpu_otel_agent.simulation.node import statedir
from gpu_otel_agent.simulation.node.cgroups import Placement
from gpu_otel_agent.simulation.node.control_client import send
from gpu_otel_agent.simulation.node.mig_node import MigNode
from gpu_otel_agent.simulation.node.scenario import (
    DeviceSpec,
    Random,
    Scenario,
    ScenarioError,
    Sine,
    Value,
    _Ctx,
    function_names,
    load_scenario,
    parse_value,
    vendor_readings,
)
from gpu_otel_agent.simulation.nvidia import fabric, nvlinks, nvml_control
from gpu_otel_agent.simulation.nvidia.build_nvml import build_library
from gpu_otel_agent.simulation.nvidia.faults import (
    ChaosSpec,
    FailSpec,
    FaultControl,
    FaultSpecError,
    parse_chaos,
    parse_fail,
)
from gpu_otel_agent.simulation.nvidia.models import BASE, model_info

if TYPE_CHECKING:  # imported when a scenario names pods (it loads grpcio)
    from gpu_otel_agent.simulation.node.kubelet import PodResourcesServer

log = logging.getLogger("gpu_sim.node")

TICK_S = 0.1

# XIDs after which the driver has lost the GPU (NVIDIA's XID catalog: 79 "GPU has fallen off
# the bus"): NVML answers NVML_ERROR_GPU_IS_LOST from then on, for every call on it.
FALLEN_OFF_THE_BUS = frozenset({79})

# Readings computed from others unless the scenario (or a `set`) gives them.
_DERIVED: Mapping[str, Callable[[Mapping[str, float | None]], float]] = {
    # The 1 s power average (NVML_FI_DEV_POWER_AVERAGE; nvmlDeviceGetPowerUsage on Ampere
    # except GA100 and newer) is the instant power unless set apart (a scenario, `sim set`).
    "power_average_w": lambda r: r.get("power_w") or 0.0,
    "power_default_limit_w": lambda r: r.get("power_limit_w") or 0.0,
    "graphics_clock_mhz": lambda r: r.get("sm_clock_mhz") or 0.0,
    "sm_clock_mhz": lambda r: (
        (r.get("max_sm_clock_mhz") or 0.0)
        * (0.35 + 0.65 * min(1.0, (r.get("utilization_gpu") or 0.0) / 30))
    ),
    "memory_clock_mhz": lambda r: r.get("max_memory_clock_mhz") or 0.0,
    "video_clock_mhz": lambda r: 0.9 * (r.get("max_video_clock_mhz") or 0.0),
    "max_graphics_clock_mhz": lambda r: r.get("max_sm_clock_mhz") or 0.0,
    "app_sm_clock_mhz": lambda r: r.get("max_sm_clock_mhz") or 0.0,
    "app_memory_clock_mhz": lambda r: r.get("max_memory_clock_mhz") or 0.0,
    "sm_active": lambda r: 0.85 * (r.get("utilization_gpu") or 0.0),
    "sm_occupancy": lambda r: 0.45 * (r.get("utilization_gpu") or 0.0),
    "tensor_active": lambda r: 0.4 * (r.get("utilization_gpu") or 0.0),
    "dram_active": lambda r: r.get("utilization_memory") or 0.0,
    "fp16_active": lambda r: 0.2 * (r.get("utilization_gpu") or 0.0),
    "fp32_active": lambda r: 0.3 * (r.get("utilization_gpu") or 0.0),
    "fp64_active": lambda r: 0.05 * (r.get("utilization_gpu") or 0.0),
    "pcie_link_gen": lambda r: r.get("pcie_max_link_gen") or 0.0,
    "pcie_link_width": lambda r: r.get("pcie_max_link_width") or 0.0,
    "pcie_tx_kb_s": lambda r: 200.0 + 3000.0 * (r.get("utilization_gpu") or 0.0),
    "pcie_rx_kb_s": lambda r: 400.0 + 6000.0 * (r.get("utilization_gpu") or 0.0),
    "nvlink_tx_kib_s": lambda r: (
        20000.0 * (r.get("utilization_gpu") or 0.0) if r.get("nvlink_links") else 0.0
    ),
    "nvlink_rx_kib_s": lambda r: (
        20000.0 * (r.get("utilization_gpu") or 0.0) if r.get("nvlink_links") else 0.0
    ),
    "clocks_event_reasons": lambda r: 1.0 if (r.get("utilization_gpu") or 0.0) < 1 else 0.0,
}


# What amdsmi answers while amdgpu refuses sysfs during a reset: rocm_smi's ErrnoToRsmiStatus
# maps EPERM to NOT_SUPPORTED and EBUSY to BUSY (AMDSMI_STATUS_NOT_SUPPORTED 2, _BUSY 30).
_RESET_STATUS: Mapping[str, int] = {"EPERM": 2, "EBUSY": 30}


class Slot(NamedTuple):
    """Where a scenario device is served: its vendor's library, under that library's index."""

    vendor: str
    local: int


class AmdTarget(NamedTuple):
    """An AMD device's library and its primary processor's index there."""

    lib: amd_lib.AmdNodeLib
    local: int


class CommandError(ValueError):
    """A control request is invalid; the node is not changed."""


@dataclass
class _Proc:
    device: int
    pid: int
    kind: str
    used_memory_mib: float
    sm_util: Value
    mem_util: Value


def _eval(v: Value, t: float, rng: random.Random) -> float | None:
    if v is None or isinstance(v, float | int):
        return v
    if isinstance(v, Sine):
        mid, amp = (v.max + v.min) / 2, (v.max - v.min) / 2
        return mid + amp * math.sin(2 * math.pi * (t + v.phase_s) / v.period_s)
    if isinstance(v, Random):
        return rng.uniform(v.min, v.max)
    raise TypeError(v)


def _deterministic_uuid(scenario: Scenario, index: int) -> str:
    h = hashlib.sha256(f"{scenario.path}:{index}".encode()).digest()
    return "GPU-" + str(uuidlib.UUID(bytes=h[:16], version=4))


def _amd_uuid(scenario: Scenario, index: int, device_id: float | None) -> str:
    """amdsmi's form: the PCI device id leads, no ``GPU-`` prefix."""
    h = hashlib.sha256(f"{scenario.path}:{index}".encode()).hexdigest()
    return f"{int(device_id or 0):04x}{h[:4]}-{h[4:8]}-{h[8:12]}-{h[12:16]}-{h[16:28]}"


class Node:
    """A running simulated node (in the daemon process)."""

    def __init__(
        self, scenario: Scenario, state_dir: Path, socket_path: Path | None = None
    ) -> None:
        self.scenario = scenario
        self.state_dir = state_dir
        self.library = build_library(scenario.missing_symbols)
        self.state_path = state_dir / "node.shm"
        self.socket_path = socket_path or default_socket_in(state_dir)
        self.lib = nvml_control.NodeLib(self.library)
        self.faults = FaultControl(self.library, self.lib.functions)
        # Each scenario device is served by its vendor's library under a vendor-local index.
        self.slots: list[Slot] = []
        # A partitioned AMD GPU is served as one amdsmi processor per compute partition: its
        # slot is the primary's (XCP 0), the others follow it (device -> all its locals).
        self.amd_locals: dict[int, tuple[int, ...]] = {}
        # The partition ids those locals serve (a mode's ids less the scenario's ``missing``).
        self.amd_ids: dict[int, tuple[int, ...]] = {}
        counts = {"nvidia": 0, "amd": 0}
        for d in scenario.devices:
            self.slots.append(Slot(d.vendor, counts[d.vendor]))
            width = len(d.partition.served) if d.partition is not None else 1
            if d.vendor == "amd":
                self.amd_locals[d.index] = tuple(range(counts["amd"], counts["amd"] + width))
                self.amd_ids[d.index] = d.partition.served if d.partition is not None else (0,)
            counts[d.vendor] += width
        self.amd_library: Path | None = build_amd_library() if counts["amd"] else None
        self.amd_state_path = state_dir / "amd.shm"
        self.amd = amd_lib.AmdNodeLib(self.amd_library) if self.amd_library else None
        self.lock = threading.RLock()
        self.rng = random.Random(0x5151)
        self.t0 = time.monotonic()
        self.values: list[dict[str, Value]] = []
        self.procs: dict[tuple[int, int], _Proc] = {}
        self.children: list[subprocess.Popen[bytes]] = []
        self.cgroups = Placement()
        self.util_set: set[int] = set()  # devices whose utilization a `set` changed
        self.kubelet: PodResourcesServer | None = None  # serving the scenario's pods
        self.outside_cgroups = 0
        self.stop_event = threading.Event()
        self.timeline_pos = 0
        self.server: socketserver.ThreadingUnixStreamServer | None = None
        self.known_functions = frozenset(function_names())
        self.mig = MigNode(self.lib)
        # (device, pid) -> the (GPU instance, compute instance) it runs on
        self.proc_gi: dict[tuple[int, int], tuple[int, int]] = {}
        self.proc_part: dict[tuple[int, int], int] = {}  # (AMD device, pid) -> its partition
        # Readings set on one AMD partition (``set`` with ``partition``): AMD local -> values.
        self.amd_overrides: dict[int, dict[str, float | None]] = {}

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        sc = self.scenario
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.lib.create(self.state_path, sum(slot.vendor == "nvidia" for slot in self.slots))
        self.lib.set_system(sc.driver_version, sc.nvml_version, sc.cuda_driver_version)
        if self.amd is not None:
            self.amd.create(self.amd_state_path, counts_amd := sum(
                len(locals_) for locals_ in self.amd_locals.values()))
            log.debug("AMD processors served: %d", counts_amd)
            self.amd.set_system(sc.amd_driver_version, "2025/06/01")
            self.amd.set_lib_version(*sc.amd_library.lib_version)
        mig_gpus: list[tuple[DeviceSpec, int, str]] = []
        for d in sc.devices:
            if d.vendor == "amd":
                self._setup_amd(d)
                continue
            local = self.slots[d.index].local
            info = model_info(d.model)
            vals: dict[str, Value] = dict(BASE)
            vals.update(info.readings)
            vals["minor_number"] = float(local)
            vals.update(d.readings)
            self.values.append(vals)
            self.lib.set_string(local, "name", d.model)
            parent_uuid = d.uuid or _deterministic_uuid(sc, d.index)
            self.lib.set_string(local, "uuid", parent_uuid)
            self.lib.set_string(local, "serial", d.serial or f"{1650924060000 + d.index:013d}")
            bus = d.pci_bus_id or f"00000000:{0x18 + 0x10 * d.index:02X}:00.0"
            if len(bus.split(":")[0]) == 4:
                bus = "0000" + bus
            self.lib.set_string(local, "pci_bus_id", bus.upper())
            self.lib.set_string(local, "vbios", d.vbios or info.vbios)
            self.lib.set_string(local, "board_part", d.board_part or info.board_part)
            for fn in d.unsupported:
                self.lib.set_function_unsupported(local, fn)
            if d.mig is not None:
                mig_gpus.append((d, local, parent_uuid))
        self._apply_values(0.0)
        # Instances start from their GPU's readings (architecture, BAR1, ...): after those.
        for d, local, parent_uuid in mig_gpus:
            assert d.mig is not None
            total = self.lib.get_reading(local, "memory_total_mib") or 0.0
            self.mig.enable(d.index, local, d.model, parent_uuid=parent_uuid,
                            memory_mib_total=total, specs=d.mig)
        if mig_gpus:
            self._apply_values(0.0)
        if sc.chaos is not None:
            self.handle({"op": "chaos", **sc.chaos}, parsed=True)
        pods: dict[tuple[str, str], set[str]] = {}
        for p in sc.processes:
            pid = p.pid if p.pid is not None else self._spawn_placeholder(
                p.cgroup, p.pod[1] if p.pod else None)
            if p.pod is not None and sc.devices[p.device].vendor == "nvidia":
                pods.setdefault(p.pod, set()).add(
                    sc.devices[p.device].uuid or _deterministic_uuid(sc, p.device))
            self.procs[(p.device, pid)] = _Proc(
                p.device, pid, p.kind, p.used_memory_mib, p.sm_util, p.mem_util
            )
            if p.mig is not None:
                self.proc_gi[(p.device, pid)] = self.mig.place_of(p.device, p.mig, p.ci)
            if p.partition is not None:
                self.proc_part[(p.device, pid)] = p.partition
        self._apply_procs(0.0)
        for (dev, pid), place in self.proc_gi.items():
            self.lib.proc_set_mig(self._slot(dev).local, pid, place)
        if pods:
            self._serve_pods(pods)

    def _setup_amd(self, d: DeviceSpec) -> None:
        assert self.amd is not None
        local = self.slots[d.index].local
        vals: dict[str, Value] = dict(amd_models.BASE)
        vals.update(amd_models.model_readings(d.model))
        vals["minor_number"] = float(local)
        if d.model in amd_models.DUAL_GCD:
            # Consecutive GCDs of a dual-GCD model share a package: the second reports 0 W.
            earlier = sum(1 for o in self.scenario.devices[: d.index] if o.model == d.model)
            vals["package_power_here"] = 1.0 if earlier % 2 == 0 else 0.0
        spec = d.partition
        if spec is None and amd_partitions.partitionable(d.model):
            spec = amd_partitions.PartitionSpec()  # SPX/NPS1: what an MI300X reports by default
        if spec is not None:
            vals.update(amd_partitions.partition_readings(vals, spec))  # a partition's share
        vals.update(d.readings)
        self.values.append(vals)
        device_id = vals.get("pci_device_id")
        uuid = d.uuid
        if uuid is None and (spec is None or spec.count == 1):
            uuid = _amd_uuid(self.scenario, d.index, device_id if isinstance(
                device_id, float | int) else None)
        bus = d.pci_bus_id or f"0000:{0x0C + 0x10 * d.index:02X}:00.0"
        served = spec.served if spec is not None else (0,)
        for partition_id, part in zip(served, self.amd_locals[d.index], strict=True):
            self.amd.set_string(part, "name", d.model)
            # None: the library generates it from serial and device id, as amdsmi does.
            if uuid is not None:
                self.amd.set_string(part, "uuid", uuid)
            self.amd.set_string(part, "serial", d.serial or f"{0x6922510011 + d.index:X}")
            self.amd.set_string(part, "vbios", "113-M3000100-102")
            # A partition's BDF carries its XCP index in the function bits (amd_smi_drm.cc;
            # rocm_smi's rsmi_dev_partition_id_get fallback for non-SPX modes).
            self.amd.set_bdf(part, f"{bus.rsplit('.', 1)[0]}.{partition_id}"
                             if partition_id else bus)
            if spec is not None:
                library = self.scenario.amd_library
                self.amd.set_partition(part, local, partition_id, spec.compute, spec.memory,
                                       uuid_per_partition=spec.uuid_per_partition(library),
                                       vram_split=library.vram_split,
                                       modes_everywhere=library.modes_everywhere,
                                       partition_memory=library.partition_memory_usage)
            # A partition's own readings (``partitions:``) stay as given, like a `set` on it.
            if partition_id < len(d.partition_readings):
                own = dict(d.partition_readings[partition_id])
                self.amd_overrides.setdefault(part, {}).update(own)
                for name, number in own.items():
                    self.amd.set_reading(part, name, number)
            for fn in d.unsupported:
                self.amd.set_function_unsupported(part, fn)

    def _spawn_placeholder(self, cgroup: str | None, hostname: str | None = None) -> int:
        """A sleeping child standing in for a GPU process, moved into ``cgroup`` if possible;
        a pod's has its ``HOSTNAME``, as a container's process has (attribution matches it)."""

        def _die_with_parent() -> None:  # pragma: no cover - runs in the child
            with contextlib.suppress(Exception):
                ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

        child = subprocess.Popen(
            ["sleep", "infinity"],
            env={**os.environ, "HOSTNAME": hostname} if hostname else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        self.children.append(child)
        if cgroup and not self.cgroups.place(child.pid, cgroup):
            self.outside_cgroups += 1
        return child.pid

    def _serve_pods(self, pods: Mapping[tuple[str, str], set[str]]) -> None:
        """A kubelet pod-resources socket naming the scenario's pods, each allocated the GPUs
        its processes run on, so the agent shows pod names off Kubernetes."""
        from gpu_otel_agent.simulation.node.kubelet import PodResourcesServer
        from gpu_otel_agent.workloads.pods import (
            ContainerAllocation,
            ContainerDevices,
            PodAllocation,
        )

        self.kubelet = PodResourcesServer(self.state_dir / "kubelet.sock")
        self.kubelet.set_pods([
            PodAllocation(namespace, name, (ContainerAllocation("main", (ContainerDevices(
                "nvidia.com/gpu", tuple(sorted(uuids))),)),))
            for (namespace, name), uuids in pods.items()])
        self.kubelet.start()

    def pods_missing(self) -> str | None:
        """Why some scenario processes show no container or pod (None: all were placed)."""
        if not self.outside_cgroups:
            return None
        reasons = "; ".join(dict.fromkeys(self.cgroups.problems))
        return (f"{self.outside_cgroups} scenario process(es) run outside their cgroups, so "
                f"they show no container or pod: {reasons} (see docs/simulator.md, "
                f"'Pods in simulation')")

    # ------------------------------------------------------------------ evaluation
    def _apply_values(
        self, t: float, only: frozenset[str] | None = None, device: int | None = None
    ) -> None:
        """Write readings: all of them (``only`` None), else the named ones, patterns and
        derived readings.  Counters are written once and then integrated in C."""
        with self.lock:
            for i, vals in enumerate(self.values):
                if device is not None and i != device:
                    continue
                vendor, local = self.slots[i]
                derived = amd_scenario.DERIVED if vendor == "amd" else _DERIVED
                lib: nvml_control.NodeLib | amd_lib.AmdNodeLib = self.lib
                if vendor == "amd" and self.amd is not None:
                    lib = self.amd
                current: dict[str, float | None] = {
                    k: _eval(v, t, self.rng) for k, v in vals.items()
                }
                for name, fn in derived.items():
                    if name not in vals:
                        current[name] = fn(current)
                targets = self.amd_locals.get(i, (local,)) if vendor == "amd" else (local,)
                for name, value in current.items():
                    if (
                        only is None
                        or name in only
                        or name in derived
                        or isinstance(vals.get(name), Sine | Random)
                    ):
                        share = value
                        if name == "memory_used_mib" and value is not None and len(targets) > 1:
                            # A partitioned GPU's VRAM use is the device's: its partitions' sum.
                            share = value / len(targets)
                        for target in targets:
                            # amd_overrides is keyed by amdsmi slots, whose numbers NVIDIA's
                            # slots share: only an AMD target may be held by one.
                            if vendor != "amd" or name not in self.amd_overrides.get(target, {}):
                                lib.set_reading(target, name, share)
            if device is None:
                # A MIG-enabled GPU's used memory is what its instances use.
                for dev, used in self.mig.apply(t, self.rng, _eval).items():
                    self.lib.set_reading(self._slot(dev).local, "memory_used_mib", used)

    def _apply_procs(self, t: float) -> None:
        with self.lock:
            for p in self.procs.values():
                sm = _eval(p.sm_util, t, self.rng) or 0.0
                mem = _eval(p.mem_util, t, self.rng) or 0.0
                vendor, local = self.slots[p.device]
                if vendor == "amd" and self.amd is not None:
                    local = self._amd_part_local(p.device, p.pid)
                    self._amd_proc_add(p.device, local, p.pid, p.used_memory_mib, sm, kind=p.kind)
                else:
                    # A GPU's utilization set at run time (`sim set utilization_gpu=10`, a
                    # timeline `set`) bounds its processes' too: none keeps more of the SMs
                    # busy than the GPU is. The scenario's own figures stand as written.
                    busy = (self.lib.get_reading(local, "utilization_gpu")
                            if p.device in self.util_set else None)
                    if busy is not None:
                        sm = min(sm, busy)
                    self.lib.proc_add(local, p.pid, p.kind, p.used_memory_mib, sm, mem)

    def _run_timeline(self, t: float) -> None:
        tl = self.scenario.timeline
        while self.timeline_pos < len(tl) and tl[self.timeline_pos].at_s <= t:
            ev = tl[self.timeline_pos]
            self.timeline_pos += 1
            req: dict[str, object] = {"op": ev.action, "device": ev.device, **ev.args}
            if ev.action == "set":
                req["values"] = dict(ev.args["values"])  # type: ignore[call-overload]
            try:
                self.handle(req, parsed=True)
                log.info("timeline t=%.1fs: %s", t, ev.action)
            except CommandError as exc:
                log.warning("timeline entry %s failed: %s", ev, exc)

    def tick_loop(self) -> None:
        last = time.monotonic()
        while not self.stop_event.wait(TICK_S):
            now = time.monotonic()
            t = now - self.t0
            try:
                self._run_timeline(t)
                self._apply_values(t, frozenset())
                self._apply_procs(t)
                self.lib.tick(now - last)
                if self.amd is not None:
                    self.amd.tick(now - last)
            except Exception:  # keep the node alive whatever a pattern does
                log.exception("tick failed")
            last = now

    # ------------------------------------------------------------------ control
    def _device(self, req: Mapping[str, object]) -> int:
        d = req.get("device")
        if isinstance(d, bool) or not isinstance(d, int):
            raise CommandError("'device' must be an integer")
        if not 0 <= d < len(self.values):
            raise CommandError(f"no device {d} (the node has {len(self.values)})")
        return d

    @staticmethod
    def _int_arg(req: Mapping[str, object], key: str, minimum: int = 0) -> int:
        v = req.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise CommandError(f"'{key}' must be an integer >= {minimum}")
        return v

    @staticmethod
    def _num_arg(req: Mapping[str, object], key: str, default: float = 0.0) -> float:
        v = req.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise CommandError(f"'{key}' must be a non-negative number")
        return float(v)

    def _slot(self, dev: int) -> Slot:
        return self.slots[dev]

    def _amd_target(self, dev: int) -> AmdTarget | None:
        slot = self.slots[dev]
        return (AmdTarget(self.amd, slot.local) if slot.vendor == "amd" and self.amd is not None
                else None)

    def handle(self, req: Mapping[str, object], parsed: bool = False) -> dict[str, object]:
        """One control request (``parsed``: from the scenario's timeline, values already
        validated), by its operation's handler (``HANDLERS``)."""
        op = req.get("op")
        if op == "node":  # who answers (handle_line adds the node to every answer)
            return {"ok": True}
        handler = HANDLERS.get(op) if isinstance(op, str) else None
        if handler is None:
            raise CommandError(f"unknown op {op!r}")
        with self.lock:
            if op in ("xid", "ecc", "proc_add") and req.get("ci") is not None \
                    and req.get("mig") is None:
                raise CommandError("'ci' needs 'mig' (the GPU instance it is in)")
            return handler(self, req, parsed)

    def _op_xid(self, req: Mapping[str, object]) -> dict[str, object]:
        dev = self._device(req)
        code = self._int_arg(req, "code")
        if self._amd_target(dev) is not None:
            raise CommandError(
                f"device {dev} is an AMD GPU: AMD reports no XIDs; use the 'event' op"
            )
        local = self._slot(dev).local
        # ``queued_unix_ns``: the moment the event enters the ring (taken just before, so never
        # late): where a latency "from the event" starts, without the command's round trip.
        if req.get("mig") is not None:
            gi, ci = self._place(dev, req["mig"], req.get("ci"))
            # Without 'ci' the XID is the GPU instance's as a whole (no compute instance).
            named = ci if req.get("ci") is not None else None
            queued = time.time_ns()
            seq = self.lib.push_event_mig(local, nvml_control.EVENT_XID, code, gi, named)
            return {"ok": True, "seq": seq, "gpu_instance_id": gi,
                    "compute_instance_id": named, "queued_unix_ns": queued}
        queued = time.time_ns()
        seq = self.lib.push_event(local, nvml_control.EVENT_XID, code)
        if code in FALLEN_OFF_THE_BUS:
            # The driver lost the GPU: from now on every call answers GPU_IS_LOST, as
            # on a real node (no more utilization or power), until `sim recover`.
            self.lib.set_lost(local, True)
        return {"ok": True, "seq": seq, "queued_unix_ns": queued}

    def _op_ecc(self, req: Mapping[str, object]) -> dict[str, object]:
        dev = self._device(req)
        kind = req.get("type", "single_bit")
        if kind not in ("single_bit", "double_bit"):
            raise CommandError("'type' must be single_bit or double_bit")
        amd = self._amd_target(dev)
        if amd is not None:  # amdsmi has no ECC notification: the counters move
            counter = "ecc_correctable" if kind == "single_bit" else "ecc_uncorrectable"
            amd.lib.bump(amd.local, counter, 1)
            return {"ok": True}
        if req.get("mig") is not None:
            return self._mig_ecc(dev, req, str(kind))
        bit = (nvml_control.EVENT_SINGLE_BIT_ECC if kind == "single_bit"
               else nvml_control.EVENT_DOUBLE_BIT_ECC)
        seq = self.lib.push_event(self._slot(dev).local, bit, 0)  # also bumps the counters
        return {"ok": True, "seq": seq}

    def _op_lost(self, req: Mapping[str, object], op: str) -> dict[str, object]:
        """lost, recover and hang: a GPU off the bus, back, or blocking every call."""
        dev = self._device(req)
        ms = self._int_arg(req, "ms") if op == "hang" else 0
        amd = self._amd_target(dev)
        target: nvml_control.NodeLib | amd_lib.AmdNodeLib = amd.lib if amd else self.lib
        local = self._slot(dev).local
        if op != "hang":
            target.set_lost(local, op == "lost")
        target.set_hang_ms(local, ms)
        return {"ok": True}

    def _op_proc_rm(self, req: Mapping[str, object]) -> dict[str, object]:
        pid = self._int_arg(req, "pid", 1)
        dev = self._device(req) if req.get("device") is not None else -1
        keys = [k for k in self.procs if k[1] == pid and (dev < 0 or k[0] == dev)]
        if not keys:
            raise CommandError(f"no GPU process with pid {pid}")
        for k in keys:
            del self.procs[k]
            self.proc_gi.pop(k, None)
            amd = self._amd_target(k[0])
            if amd is not None:
                amd.lib.proc_rm(self._amd_part_local(k[0], pid), pid)
                self.proc_part.pop(k, None)
            else:
                self.lib.proc_rm(self._slot(k[0]).local, pid)
        return {"ok": True, "removed": len(keys)}

    def _nvidia_index(self) -> dict[int, int]:
        """NVIDIA library index -> scenario index."""
        return {slot.local: i for i, slot in enumerate(self.slots) if slot.vendor == "nvidia"}

    def _stats(self) -> dict[str, object]:
        """Call counts of both libraries; per-device counts under the scenario's indices."""
        totals, per_local = self.lib.call_counts()
        by_scenario = self._nvidia_index()
        per_dev: dict[str, dict[str, int]] = {
            fn: {str(by_scenario.get(int(d), d)): c for d, c in devs.items()}
            for fn, devs in per_local.items()
        }
        processes = self.lib.proc_count()
        event_seq = self.lib.event_seq()
        out: dict[str, object] = {}
        if self.amd is not None:
            amd_totals, amd_per_local = self.amd.call_counts()
            # A partitioned GPU's processors count under its scenario index, summed.
            amd_index = {local: i for i, locals_ in self.amd_locals.items() for local in locals_}
            for local, calls in amd_per_local.items():
                for fn, c in calls.items():
                    slot = per_dev.setdefault(fn, {})
                    key = str(amd_index[local])
                    slot[key] = slot.get(key, 0) + c
            totals = {**totals, **amd_totals}
            processes += self.amd.proc_count()
            out["amd_event_seq"] = self.amd.event_seq()
        nvidia_index = self._nvidia_index()
        return {
            "chaos": self.faults.stats(nvidia_index),
            "calls": totals,
            "per_device": per_dev,
            "devices": len(self.values),
            "processes": processes,
            "event_seq": event_seq,
            "uptime_s": round(time.monotonic() - self.t0, 3),
            **out,
        }

    def _op_recovery(self, req: Mapping[str, object]) -> dict[str, object]:
        """As the driver does: the field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION takes the action,
        then a nvmlEventTypeGpuRecoveryAction event (eventData 0) says to read it."""
        dev = self._device(req)
        action = self._int_arg(req, "action")
        if action not in nvml_control.RECOVERY_ACTIONS:
            raise CommandError("'action' must be 0..7 (nvmlDeviceGpuRecoveryAction_t)")
        if self._amd_target(dev) is not None:
            raise CommandError(f"device {dev} is an AMD GPU: recovery actions are NVML's")
        local = self._slot(dev).local
        self.values[dev]["recovery_action"] = float(action)
        self.lib.set_reading(local, "recovery_action", float(action))
        seq = self.lib.push_event(local, nvml_control.EVENT_RECOVERY_ACTION, 0)
        return {"ok": True, "seq": seq}

    def _op_event(self, req: Mapping[str, object]) -> dict[str, object]:
        dev = self._device(req)
        amd = self._amd_target(dev)
        if amd is None:
            raise CommandError(f"device {dev} is not an AMD GPU; 'event' is for AMD devices")
        kind = req.get("type")
        if kind not in amd_lib.EVENT_TYPES:
            raise CommandError(f"'type' must be one of {', '.join(amd_lib.EVENT_TYPES)}")
        message = req.get("message", "")
        if not isinstance(message, str):
            raise CommandError("'message' must be a string")
        local = amd.local
        if req.get("partition") is not None:  # raised on the partition (KFD node) that faulted
            local = self._amd_partition_local(dev, self._int_arg(req, "partition"))
        seq = amd.lib.push_event(local, str(kind), message or f"simulated {kind}")
        return {"ok": True, "seq": seq}

    def _amd_part_local(self, dev: int, pid: int) -> int:
        """The AMD processor a process of ``dev`` runs on: its partition's (else the primary)."""
        return self._amd_partition_local(dev, self.proc_part.get((dev, pid), 0))

    def _amd_partition_local(self, dev: int, part: int) -> int:
        """The amdsmi slot serving partition id ``part`` of ``dev``; CommandError if none."""
        ids = self.amd_ids.get(dev, ())
        if part not in ids:
            raise CommandError(f"device {dev} has no partition {part}")
        return self.amd_locals[dev][ids.index(part)]

    def _amd_proc_add(self, dev: int, local: int, pid: int, mem: float, sm: float, *,
                      kind: str) -> None:
        """A ``compute`` process is a HIP one (fdinfo engine time stays 0; its activity shows
        as CU occupancy), a ``graphics`` one submits through DRM (engine time counts)."""
        assert self.amd is not None
        units = self.values[dev].get("compute_units")
        cus = round(sm / 100 * units) if isinstance(units, float | int) else 0
        if self.scenario.amd_library.cu_occupancy_percent and isinstance(units, float | int):
            cus = int(cus * 100 // units) if units else 0  # rocm_smi's integer percentage
        self.amd.proc_add(local, pid, mem, sm, cu_occupancy=cus, drm=kind == "graphics")

    def _op_reset(self, req: Mapping[str, object]) -> dict[str, object]:
        """An AMD GPU reset: GPU_PRE_RESET, then for ``ms`` every sysfs-backed call answers what
        amdsmi answers while amdgpu refuses sysfs reads (``errno`` EPERM on older kernels ->
        NOT_SUPPORTED, EBUSY -> BUSY), then GPU_POST_RESET."""
        dev = self._device(req)
        amd = self._amd_target(dev)
        if amd is None:  # NVIDIA: volatile counters and uptime restart, RESET_REQUIRED clears
            self.faults.gpu_reset(self._slot(dev).local)
            return {"ok": True}
        ms = self._int_arg(req, "ms") if "ms" in req else 1000
        errno_name = req.get("errno", "EPERM")
        if errno_name not in _RESET_STATUS:
            raise CommandError(f"'errno' must be one of {', '.join(_RESET_STATUS)}")
        lib, local = amd
        # In reset before the event is readable: a reader woken by GPU_PRE_RESET must find
        # the device refusing (the other order let a fast reader call in between).
        lib.set_reset(local, _RESET_STATUS[str(errno_name)])
        lib.push_event(local, "gpu_pre_reset", "GPU reset begin")

        def _finish() -> None:
            with self.lock:
                lib.set_reset(local, 0)
                lib.push_event(local, "gpu_post_reset", "GPU reset end")

        timer = threading.Timer(ms / 1000, _finish)
        timer.daemon = True
        timer.start()
        return {"ok": True}

    def _nvidia_device(self, req: Mapping[str, object], op: str) -> int:
        dev = self._device(req)
        if self._amd_target(dev) is not None:
            raise CommandError(f"device {dev} is an AMD GPU; '{op}' is for NVIDIA devices")
        return self._slot(dev).local

    def _op_fault(self, op: str, req: Mapping[str, object]) -> dict[str, object]:
        """chaos, fail, driver_reload, reset_required (nvml_chaos.h does the work)."""
        functions = tuple(self.lib.functions)
        n_dev = len(self.values)
        body = {k: v for k, v in req.items() if k != "op"}
        try:
            if op == "chaos":
                body.pop("device", None)  # a timeline entry carries device: null
                spec = parse_chaos(body, functions, n_dev)
                local = spec
                if spec.devices is not None:
                    nv = [self._slot(d).local for d in spec.devices
                          if self._slot(d).vendor == "nvidia"]
                    local = ChaosSpec(**{**spec.__dict__, "devices": tuple(nv)})
                self.faults.apply_chaos(local, n_dev)
                self.faults.spec = spec
                return {"ok": True, "chaos": spec.as_request()}
            if op == "fail":
                if body.get("off") is True and set(body) <= {"off", "device"} and \
                        body.get("device") is None:
                    return {"ok": True, "cleared": self.faults.clear_faults()}
                f = parse_fail(body, functions, n_dev)
                if f.device is not None:
                    f = FailSpec(**{**f.__dict__, "device": self._nvidia_device(req, op)})
                self.faults.add_fault(f)
                return {"ok": True}
        except FaultSpecError as exc:
            raise CommandError(str(exc)) from exc
        if op == "driver_reload":
            gen = self.faults.driver_reload()
            return {"ok": True, "driver_generation": gen}
        # reset_required
        on = req.get("on", True)
        if not isinstance(on, bool):
            raise CommandError("'on' must be true or false")
        self.faults.set_reset_required(self._nvidia_device(req, op), on)
        return {"ok": True}

    def _op_set(self, req: Mapping[str, object], parsed: bool) -> dict[str, object]:
        dev = self._device(req)
        values = req.get("values")
        if not isinstance(values, Mapping) or not values:
            raise CommandError("'values' must be a non-empty object of reading: value")
        allowed = vendor_readings(self._slot(dev).vendor)
        new: dict[str, Value] = {}
        ctx = _Ctx(Path("<set>"))
        for k, v in values.items():
            try:
                link = nvlinks.set_key(k, v) if self._slot(dev).vendor == "nvidia" else None
            except nvlinks.LinkError as error:
                raise CommandError(f"{k}: {error}") from error
            if link is not None:  # nvlink.N.field=value: that link's reading
                new[link[0]] = link[1]
                continue
            if k not in allowed:
                raise CommandError(f"unknown reading {k!r}")
            if parsed and (v is None or isinstance(v, float | int | Sine | Random)):
                new[k] = v
                continue
            try:
                new[k] = parse_value(ctx, v, f"values.{k}")
            except ScenarioError as exc:
                raise CommandError(str(exc).split(": ", 1)[-1]) from exc
        if req.get("partition") is not None:
            return self._set_partition(dev, self._int_arg(req, "partition"), new)
        self.values[dev].update(new)
        if "utilization_gpu" in new and self._slot(dev).vendor == "nvidia":
            self.util_set.add(dev)
        self._apply_values(time.monotonic() - self.t0, frozenset(new), dev)
        self._apply_procs(time.monotonic() - self.t0)
        return {"ok": True}

    def _op_fabric(self, req: Mapping[str, object]) -> dict[str, object]:
        """Change the fabric probe's answer (state, clique, health) of an NVIDIA GPU; a partial
        ``health`` changes only the fields it names."""
        dev = self._nvidia_device(req, "fabric")
        current = {k: (float(v) if isinstance(v, int | float) else None)
                   for k, v in self.values[dev].items() if k.startswith("fabric_")}
        try:
            new = fabric.readings(req.get("fabric"), current)
        except fabric.FabricError as error:
            raise CommandError(f"fabric: {error}") from error
        if not new:
            raise CommandError("fabric: nothing to change")
        return self._op_set({"device": dev, "values": new}, parsed=True)

    def _set_partition(self, dev: int, part: int, new: Mapping[str, Value]) -> dict[str, object]:
        """Readings of one compute partition of an AMD GPU (its activity, its VRAM use); what
        is the socket's (power, energy, temperatures) is read from partition 0 by every one."""
        if self.amd is None:
            raise CommandError(f"device {dev} has no partition {part}")
        local = self._amd_partition_local(dev, part)
        fixed: dict[str, float | None] = {}
        for name, value in new.items():
            if value is not None and not isinstance(value, float | int):
                raise CommandError(f"'{name}': a partition takes plain numbers (or null)")
            fixed[name] = None if value is None else float(value)
        self.amd_overrides.setdefault(local, {}).update(fixed)
        for name, number in fixed.items():
            self.amd.set_reading(local, name, number)
        return {"ok": True}

    def _op_proc_add(self, req: Mapping[str, object]) -> dict[str, object]:
        dev = self._device(req)
        pid = self._int_arg(req, "pid", 1)
        mem = self._num_arg(req, "used_memory_mib", self._num_arg(req, "memory_mib"))
        sm = self._num_arg(req, "sm_util")
        mu = self._num_arg(req, "mem_util")
        kind = req.get("type", "compute")
        if kind not in nvml_control.PROC_KINDS:
            raise CommandError("'type' must be compute, graphics or mps")
        local = self._slot(dev).local
        amd = self._amd_target(dev)
        counter: nvml_control.NodeLib | amd_lib.AmdNodeLib = amd.lib if amd else self.lib
        if (dev, pid) not in self.procs and counter.proc_count() >= 4096:
            raise CommandError("process table full")
        place = self._place(dev, req["mig"], req.get("ci")) if req.get("mig") is not None \
            else None
        self.procs[(dev, pid)] = _Proc(dev, pid, str(kind), mem, sm, mu)
        if amd is not None:
            if req.get("partition") is not None:
                part = self._int_arg(req, "partition")
                self._amd_partition_local(dev, part)  # CommandError if not served
                self.proc_part[(dev, pid)] = part
            self._amd_proc_add(dev, self._amd_part_local(dev, pid), pid, mem, sm, kind=str(kind))
        else:
            self.lib.proc_add(local, pid, str(kind), mem, sm, mu)
            self.lib.proc_set_mig(local, pid, place)
        if place is not None:
            self.proc_gi[(dev, pid)] = place
        else:
            self.proc_gi.pop((dev, pid), None)
        return {"ok": True}

    def _place(self, dev: int, position: object, ci: object = None) -> tuple[int, int]:
        """(GPU instance id, compute instance id) of the ``position``-th MIG instance of
        ``dev`` and its ``ci``-th compute instance (None: the first)."""
        if isinstance(position, bool) or not isinstance(position, int):
            raise CommandError("'mig' must be an integer (position in the device's MIG list)")
        if ci is not None and (isinstance(ci, bool) or not isinstance(ci, int)):
            raise CommandError("'ci' must be an integer (position in the GPU instance's "
                               "compute instances)")
        try:
            return self.mig.place_of(dev, position, ci)
        except ValueError as error:
            raise CommandError(str(error)) from error

    def _mig_ecc(self, dev: int, req: Mapping[str, object], kind: str) -> dict[str, object]:
        """An uncorrectable error in a MIG instance's SRAM: the one ECC count NVML keeps per
        instance ("non-DRAM uncorrectable volatile errors") goes up, and a double-bit ECC event
        of the GPU reports it (nvml.h gives event data an instance for XIDs only; the parent's
        aggregate counter counts it)."""
        if kind != "double_bit":
            raise CommandError("a MIG instance counts uncorrectable (double_bit) errors only")
        try:
            gi, ci = self.mig.sram_error(dev, self._int_arg(req, "mig"),
                                         self._int_arg(req, "ci") if req.get("ci") is not None
                                         else None)
        except (ValueError, StopIteration) as error:
            raise CommandError(str(error)) from error
        seq = self.lib.push_event(self._slot(dev).local, nvml_control.EVENT_DOUBLE_BIT_ECC, 0)
        return {"ok": True, "seq": seq, "gpu_instance_id": gi, "compute_instance_id": ci}

    def _op_mig(self, req: Mapping[str, object]) -> dict[str, object]:
        """Reconfigure a MIG-enabled GPU: ``set`` is the profiles ("3g.40gb,1g.10gb" or a list)."""
        dev = self._device(req)
        wanted = req.get("set")
        if isinstance(wanted, str):
            wanted = [p.strip() for p in wanted.split(",") if p.strip()]
        if not isinstance(wanted, list) or not all(isinstance(p, str) for p in wanted):
            raise CommandError("'set' must be a list of MIG profile names or 'a,b,c'")
        busy = {gi: pid for (d, pid), (gi, _) in self.proc_gi.items() if d == dev}
        try:
            uuids = self.mig.reconfigure(dev, [str(p) for p in wanted], busy)
        except ValueError as error:
            raise CommandError(str(error)) from error
        self._apply_values(time.monotonic() - self.t0)
        return {"ok": True, "instances": [
            {"uuid": c.uuid, "profile": c.profile.name, "gpu_instance_id": i.gi,
             "compute_instance_id": c.ci, "mig_index": c.slot}
            for i in self.mig.instances(dev) for c in i.computes if c.uuid in uuids]}

    def handle_line(self, line: bytes) -> dict[str, object]:
        try:
            req = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            return {"ok": False, "error": f"bad JSON: {exc}"}
        if not isinstance(req, dict):
            return {"ok": False, "error": "request must be a JSON object"}
        try:
            reply = self.handle(req)
        except CommandError as exc:
            reply = {"ok": False, "error": str(exc)}
        except Exception as exc:  # a bad command never takes the node down
            log.exception("request %r failed", req)
            reply = {"ok": False, "error": f"internal error: {exc}"}
        # Every answer names the node that gave it: with several nodes on a machine, a
        # command that reached another one than meant says so.
        return {**reply, "node": self.identity()}

    def identity(self) -> dict[str, object]:
        return {"pid": os.getpid(), "scenario": str(self.scenario.path),
                "socket": str(self.socket_path)}

    # ------------------------------------------------------------------ lifecycle
    def env(self) -> dict[str, str]:
        libdir = str(self.library.parent)
        if self.amd_library is not None:
            # amdsmi's wrapper finds libamd_smi.so through the dynamic linker, like pynvml.
            libdir = f"{libdir}:{self.amd_library.parent}"
        old = os.environ.get("LD_LIBRARY_PATH", "")
        env = {
            "GPU_SIM_NODE": str(self.state_path),
            "GPU_SIM_SOCKET": str(self.socket_path),
            "LD_LIBRARY_PATH": f"{libdir}:{old}" if old else libdir,
        }
        if self.kubelet is not None:  # the agent reads pod names from the node's kubelet
            env["GPU_AGENT_KUBELET_SOCKET"] = str(self.kubelet.socket_path)
        if self.amd_library is not None:
            env["GPU_SIM_AMD_NODE"] = str(self.amd_state_path)
        return env

    def describe(self) -> dict[str, object]:
        return {
            "state": str(self.state_path),
            "socket": str(self.socket_path),
            "library": str(self.library),
            "amd_library": str(self.amd_library) if self.amd_library else None,
            "amd_state": str(self.amd_state_path) if self.amd_library else None,
            "devices": len(self.values),
            "env": self.env(),
            "pods_missing": self.pods_missing(),
        }

    def serve(self) -> None:
        node = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    if not line.strip():
                        continue
                    reply = node.handle_line(line)
                    self.wfile.write(json.dumps(reply).encode() + b"\n")
                    self.wfile.flush()

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

            def server_bind(self) -> None:
                # Through the socket's directory when its path is longer than a socket
                # address holds; ``server_address`` stays the real path.
                unix_socket.bind(self.socket, node.socket_path)

        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        statedir.claim_socket(self.socket_path)  # never take over a live node's socket
        self.server = Server(str(self.socket_path), Handler)
        threading.Thread(target=self.tick_loop, name="sim-tick", daemon=True).start()
        threading.Thread(target=self.server.serve_forever, name="sim-ctl", daemon=True).start()

    def shutdown(self) -> None:
        self.stop_event.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        for child in self.children:
            child.terminate()
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(2)
        self.cgroups.remove()
        if self.kubelet is not None:
            self.kubelet.stop()


Handler = Callable[[Node, Mapping[str, object], bool], dict[str, object]]

# The node's side of each operation (``operations.OPERATIONS``), by its name; ``node`` is
# answered before the lock (``Node.handle``).
HANDLERS: Mapping[str, Handler] = {
    "xid": lambda node, req, _: node._op_xid(req),
    "ecc": lambda node, req, _: node._op_ecc(req),
    "lost": lambda node, req, _: node._op_lost(req, "lost"),
    "recover": lambda node, req, _: node._op_lost(req, "recover"),
    "hang": lambda node, req, _: node._op_lost(req, "hang"),
    "set": lambda node, req, parsed: node._op_set(req, parsed),
    "proc_add": lambda node, req, _: node._op_proc_add(req),
    "proc_rm": lambda node, req, _: node._op_proc_rm(req),
    "event": lambda node, req, _: node._op_event(req),
    "reset": lambda node, req, _: node._op_reset(req),
    "recovery": lambda node, req, _: node._op_recovery(req),
    "chaos": lambda node, req, _: node._op_fault("chaos", req),
    "fail": lambda node, req, _: node._op_fault("fail", req),
    "driver_reload": lambda node, req, _: node._op_fault("driver_reload", req),
    "reset_required": lambda node, req, _: node._op_fault("reset_required", req),
    "fabric": lambda node, req, _: node._op_fabric(req),
    "mig": lambda node, req, _: node._op_mig(req),
    "stats": lambda node, req, _: {"ok": True, **node._stats()},
    "node": lambda node, req, _: {"ok": True},
    "info": lambda node, req, _: {"ok": True, **node.describe()},
}


def default_socket_in(state_dir: Path) -> Path:
    """``state_dir/control.sock``, however deep: a path longer than a socket address holds is
    bound and reached through its directory (``gpu_otel_agent.unix_socket``), where the
    clients look for it (``control_client.default_socket_path``)."""
    return state_dir / "control.sock"


def _claim(
    directory: Path, pick_free: bool, socket_path: Path | None
) -> tuple[statedir.StateDirLock, Path]:
    """A state directory of this node's and its control socket. Where a directory's default
    socket is served by another node (a ``run --simulate`` links the well-known path to its
    own), a node free to pick takes the next directory and warns which node holds the other;
    a socket named on purpose (``--socket``, ``GPU_SIM_SOCKET``) is refused when taken."""
    taken: list[Path] = []
    while True:
        lock = statedir.acquire(directory, pick_free, skip=taken)
        path = socket_path or default_socket_in(lock.path)
        try:
            statedir.claim_socket(path)
        except statedir.StateDirBusy:
            lock.release()
            if socket_path is not None or not pick_free:
                raise
            taken.append(lock.path)
            log.warning("control socket %s is served by another simulated node (%s); this "
                        "node takes the next directory: reach it with the GPU_SIM_SOCKET it "
                        "prints", path, _describe(path))
            continue
        return lock, path


def _describe(path: Path) -> str:
    """The node at ``path`` as it names itself (pid, scenario), or why it cannot be asked."""
    try:
        node = send(path, {"op": "node"}, timeout=2).get("node")
    except (OSError, ValueError) as exc:
        return f"it does not say who it is: {exc}"
    if not isinstance(node, dict):
        return "a node too old to say who it is"
    return f"pid {node.get('pid')}, scenario {node.get('scenario')}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_otel_agent.simulation.node.daemon")
    ap.add_argument("scenario", type=Path, nargs="?", default=None)
    ap.add_argument("--capture", type=Path, action="append", default=[],
                    help="serve the GPUs of this capture (nvidia-smi -q -x, nvidia-smi -q); "
                         "repeatable")
    ap.add_argument("--dir", type=Path, required=True, help="state directory")
    ap.add_argument("--socket", type=Path, default=None, help="control socket path")
    ap.add_argument("--pick-free", action="store_true",
                    help="if --dir is in use by a running node, use the first free DIR.N")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s gpu-sim %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        scenario = load_scenario(args.scenario, args.capture)
    except ScenarioError as exc:
        print(json.dumps({"ready": False, "error": str(exc)}), flush=True)
        return 2
    try:
        lock, socket_path = _claim(args.dir.resolve(), args.pick_free, args.socket)
    except statedir.StateDirBusy as exc:
        print(json.dumps({"ready": False, "error": str(exc)}), flush=True)
        print(f"gpu-agent sim up: {exc}", file=sys.stderr)
        return 2
    node = Node(scenario, lock.path, socket_path)
    node.setup()
    if (missing := node.pods_missing()) is not None:
        log.warning("%s", missing)
    node.serve()
    lock.describe(scenario=str(scenario.path), socket=str(node.socket_path))
    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    # SIGHUP: the terminal of a `sim up` closed; the node goes and takes its socket with it.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop)
    env = node.env()
    # One write: the parent stops reading (and closes the pipe) once it has the ready line, so
    # anything printed later would die of EPIPE and take the node down with it.
    announcement = "\n".join(
        (
            json.dumps({"ready": True, **node.describe()}),
            f"# simulated node: {len(scenario.devices)} GPU(s), control socket "
            f"{node.socket_path}",
            *([f"# {missing}"] if (missing := node.pods_missing()) else []),
            *(f"# not served: {line}" for fragment in scenario.captures
              for line in not_served_lines(fragment)),
            "export " + " ".join(f"{k}={v}" for k, v in env.items()),
        )
    )
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.write(announcement + "\n")
        sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    done.wait()
    node.shutdown()
    lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
