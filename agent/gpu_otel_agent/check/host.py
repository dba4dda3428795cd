"""The node's side of ``gpu-agent check``: GPU libraries and GPUs, namespaces, cgroups, the
kubelet, the kernel log, process events, eBPF, the spool, the Prometheus port, a running agent.

Each check asks the real thing once (opens the library, reads a group, lists pods, binds the
port) rather than guessing from files, and says in its result what the agent will lack.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import tempfile
from pathlib import Path

from gpu_otel_agent.backends.discovery import installed_backends
from gpu_otel_agent.backends.protocol import Backend, BackendUnavailable, Device
from gpu_otel_agent.check.result import Result, failed, passed, warned
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.events.spool import prepare as prepare_spool
from gpu_otel_agent.export.events.spool import spool_problem
from gpu_otel_agent.local.client import LocalClientDenied, LocalClientError, get

# The initial PID namespace's inode (PROC_PID_INIT_INO, include/linux/proc_ns.h): every host
# process is in it; a container without hostPID is not.
HOST_PID_NAMESPACE = 0xEFFFFFFC
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


def gpus(config: AgentConfig) -> list[Result]:
    """Each GPU library that opens (driver version), then one fast-group read per GPU."""
    results: list[Result] = []
    opened: list[Backend] = []
    skipped: list[str] = []
    try:
        for backend in installed_backends():
            try:
                info = backend.open()
            except BackendUnavailable as reason:
                skipped.append(f"{backend.name}: {reason}")
                continue
            opened.append(backend)
            devices = backend.devices()
            results.append(passed(f"{backend.name} library",
                                  f"driver {info.driver_version}, {len(devices)} GPU(s)"))
            for device in devices:
                results.append(_read(device))
        if not opened:
            results.append(failed(
                "gpu libraries", "no GPU library opened (" + "; ".join(skipped) + ")",
                "install the NVIDIA driver (NVML) or ROCm's amd-smi-lib, and in a container "
                "mount them (NVIDIA container toolkit: NVIDIA_DRIVER_CAPABILITIES=utility)"))
    finally:
        for backend in opened:
            with contextlib.suppress(Exception):
                backend.close()
    return results


def _read(device: Device) -> Result:
    identity = device.identity
    name = f"gpu {identity.index}" + (f" {identity.partition.profile}"
                                      if identity.partition is not None else "")
    try:
        groups = device.probe()
        readings = device.read("fast") if "fast" in groups else ()
    except Exception as error:  # a lost GPU, a library error: the device is not readable
        return failed(name, f"{identity.model} {identity.uuid}: {type(error).__name__}: "
                      f"{error}", "check `nvidia-smi -q` / `amd-smi` and the kernel log for "
                      "this GPU (XID, fallen off the bus)")
    if not readings:
        return warned(name, f"{identity.model}: no readings in the fast group",
                      "the driver answers but reports nothing; update the driver")
    return passed(name, f"{identity.model}: {len(readings)} readings")


def host_pid_namespace(config: AgentConfig) -> list[Result]:
    name = "host pid namespace"
    try:
        inode = os.stat("/proc/self/ns/pid").st_ino
    except OSError as error:
        return [warned(name, f"cannot read /proc/self/ns/pid: {error.strerror}",
                       "mount /proc of the host")]
    if inode == HOST_PID_NAMESPACE:
        return [passed(name, "the host's processes are visible")]
    return [warned(name, "in a PID namespace of its own: GPU processes (host PIDs) cannot be "
                   "attributed to containers and pods",
                   "run with hostPID: true (the chart does)")]


def cgroups(config: AgentConfig) -> list[Result]:
    name = "cgroup layout"
    root = Path(config.attribution.cgroup_root)
    if not root.is_dir():
        return [failed(name, f"{root} does not exist",
                       "mount the host's /sys/fs/cgroup there (attribution.cgroup_root)")]
    if (root / "cgroup.controllers").exists():
        return [passed(name, f"cgroup v2 at {root}")]
    v1 = [c for c in ("memory", "pids", "cpu,cpuacct", "devices") if (root / c).is_dir()]
    if v1:
        hybrid = " with a unified hierarchy" if (root / "unified").is_dir() else ""
        return [passed(name, f"cgroup v1 at {root} ({', '.join(v1)}){hybrid}")]
    return [failed(name, f"{root} is neither a cgroup v2 nor a v1 hierarchy",
                   "point attribution.cgroup_root at the host's /sys/fs/cgroup")]


def kubelet(config: AgentConfig) -> list[Result]:
    name = "kubelet pod-resources"
    settings = config.attribution
    if not settings.enabled or settings.kubelet.socket is None:
        return [passed(name, "off (no pod names asked for)")]
    path = Path(settings.kubelet.socket)
    if not path.exists():
        detail = f"no socket at {path}: processes will show containers but no pod names"
        fix = ("mount the host's /var/lib/kubelet/pod-resources (the chart does); off "
               "Kubernetes set attribution.kubelet.socket: null")
        in_kubernetes = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        return [failed(name, detail, fix) if in_kubernetes else warned(name, detail, fix)]
    from gpu_otel_agent.runtime.attribution_setup import pod_source

    source = pod_source(settings)
    if source is None:
        return [warned(name, f"{path} exists but no workload source plugin is installed",
                       "install the agent with its kubernetes plugin")]

    async def ask() -> int:
        async with asyncio.timeout(settings.kubelet.timeout):
            return len(await source.list())

    try:
        pods = asyncio.run(ask())
    except TimeoutError:
        return [failed(name, f"{path}: no answer within {settings.kubelet.timeout:g}s",
                       "is the kubelet healthy? (attribution.kubelet.timeout)")]
    except Exception as error:
        return [failed(name, f"{path}: {type(error).__name__}: {error}",
                       "the agent must run as root to use the kubelet's socket; check that "
                       "the kubelet serves pod-resources v1")]
    finally:
        source.close()
    return [passed(name, f"{path} answers: {pods} pod(s) with devices")]


def kmsg(config: AgentConfig) -> list[Result]:
    name = "kernel log"
    if not (config.health.enabled and config.health.kmsg):
        return [passed(name, "off (health.kmsg)")]
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return [warned(name, "no /dev/kmsg: XIDs come from NVML events only",
                       "mount the host's /dev/kmsg (chart: health.kernelLog)")]
    except PermissionError:
        return [warned(name, "/dev/kmsg is not readable: XIDs come from NVML events only",
                       "add CAP_SYSLOG (chart: health.kernelLog) or run as root")]
    try:
        with contextlib.suppress(BlockingIOError):
            os.read(fd, 8192)
    except PermissionError:
        return [warned(name, "reading /dev/kmsg is not allowed (kernel.dmesg_restrict): XIDs "
                       "come from NVML events only", "add CAP_SYSLOG")]
    finally:
        os.close(fd)
    return [passed(name, "/dev/kmsg readable (XIDs from the kernel log too)")]


def process_events(config: AgentConfig) -> list[Result]:
    name = "process events"
    settings = config.attribution
    if not settings.enabled or settings.process_events != "netlink":
        return [passed(name, f"netlink off (attribution.process_events: "
                             f"{settings.process_events})")]
    from gpu_otel_agent.workloads.netlink import ProcConnector

    async def listen() -> bool:
        connector = ProcConnector(lambda pid: None, lambda pid: None, lambda: None)
        started = connector.start(asyncio.get_running_loop())
        connector.stop()
        return started

    if asyncio.run(listen()):
        return [passed(name, "netlink process connector: exec/exit events allowed")]
    return [warned(name, "netlink process events not allowed: new processes are found at "
                   "the next reconciliation (attribution.reconcile_interval)",
                   "add CAP_NET_ADMIN and the host network (chart: "
                   "attribution.processEvents)")]


def _capabilities() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def ebpf(config: AgentConfig) -> list[Result]:
    name = "ebpf"
    if not config.ebpf.enabled:
        return [passed(name, "off (ebpf.enabled)")]
    missing = []
    if not Path("/sys/kernel/btf/vmlinux").exists():
        missing.append("kernel BTF (/sys/kernel/btf/vmlinux)")
    caps = _capabilities()
    wanted = {"CAP_BPF": CAP_BPF, "CAP_PERFMON": CAP_PERFMON, "CAP_SYS_ADMIN": CAP_SYS_ADMIN}
    missing.extend(cap for cap, bit in wanted.items() if not caps >> bit & 1)
    if config.ebpf.object_path and not Path(config.ebpf.object_path).is_file():
        missing.append(f"the BPF object {config.ebpf.object_path}")
    if missing:
        return [failed(name, "missing: " + ", ".join(missing),
                       "a kernel with BTF and the capabilities the chart adds with "
                       "ebpf.enabled (BPF, PERFMON, SYS_ADMIN, SYS_PTRACE)")]
    return [passed(name, "BTF and capabilities present")]


def spool(config: AgentConfig) -> list[Result]:
    name = "event spool"
    if not config.health.enabled or config.health.spool_path is None:
        return [passed(name, "off (health.spool_path: null)")]
    path = Path(config.health.spool_path)
    try:
        # Created as the agent creates it (0700): a check never leaves a spool `run` refuses.
        prepare_spool(path)
        problem = spool_problem(path)
        if problem is not None:
            return [failed(name, problem, "the agent would run without a spool: events are "
                           "not kept across a crash")]
        with tempfile.NamedTemporaryFile(dir=path, prefix=".check-"):
            pass
    except OSError as error:
        return [failed(name, f"{path} is not writable: {error.strerror}",
                       "mount a writable volume there (chart: health.spool.hostPath) or set "
                       "health.spool_path / GPU_AGENT_EVENT_SPOOL")]
    return [passed(name, f"{path} writable, private to the agent")]


def prometheus_port(config: AgentConfig) -> list[Result]:
    name = "prometheus listen"
    settings = config.prometheus
    if not settings.enabled:
        return [passed(name, "off (prometheus.enabled)")]
    host, _, port = settings.listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, int(port)))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return [warned(name, f"{settings.listen} is in use (by the running agent, or "
                               "another exporter such as dcgm-exporter)",
                               "stop the other exporter or set prometheus.listen")]
            return [failed(name, f"cannot listen on {settings.listen}: {error.strerror}",
                           "set prometheus.listen to an address of this host")]
    return [passed(name, f"{settings.listen} free")]


def running_agent(config: AgentConfig) -> list[Result]:
    name = "running agent"
    settings = config.local_endpoint
    if not settings.enabled:
        return [passed(name, "local endpoint off (local_endpoint.enabled)")]
    try:
        document = get(Path(settings.socket), "/v1/snapshot", timeout=2.0)
    except LocalClientDenied as error:
        return [warned(name, str(error), "run the check as root or as a member of "
                       "local_endpoint.group to see the running agent")]
    except LocalClientError as error:
        return [warned(name, str(error), "start the agent (gpu-agent run); this is expected "
                       "before its first start")]
    agent, devices = document["agent"], document["devices"]
    unhealthy = [f"gpu {d['index']} {d['health']}" for d in devices if d["health"] != "ok"]
    detail = (f"agent {agent.get('version')} (pid {agent.get('pid')}) serves "
              f"{len(devices)} device(s) at {settings.socket}")
    if unhealthy:
        return [warned(name, f"{detail}; not ok: {', '.join(unhealthy)}",
                       "gpu-agent top shows the events behind it")]
    return [passed(name, detail)]
