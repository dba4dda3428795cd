"""The PID -> workload map, for GPU processes only, kept current by events.

A PID is resolved the first time a GPU lists it (one read of its /proc files) and then served
from memory; the netlink proc connector tells us when it exits or execs, cgroup inotify when
pods come and go, and a low-rate reconciliation re-checks only the PIDs we hold. Nothing here
walks /proc or the cgroup tree, so the per-cycle cost follows the GPU processes alone.

Pod names come from the kubelet's pod-resources answer, which carries no pod UID; the cgroup
gives the UID. A UID is bound to a pod when the process's ``HOSTNAME`` (the pod name, unless the
pod sets a hostname) names exactly one listed pod (in the pod's namespace, read from its
service-account mount, where present), or, without ``HOSTNAME``, when exactly one unbound listed
pod was allocated the GPU the process runs on (by a device plugin or through a DRA claim whose
device the source tied to it). A binding lasts while the pod is listed and its
cgroup exists. A process whose pod is not listed yet is reported to the service (``wanted``),
which asks the kubelet for that pod (``Get``) or for all of them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace

from gpu_otel_agent.model.snapshot import Attributes
from gpu_otel_agent.model.workload import Workload
from gpu_otel_agent.workloads.claim_index import ClaimIndex, claim_on, holds
from gpu_otel_agent.workloads.devices import GpuDevice, match
from gpu_otel_agent.workloads.names import sanitize
from gpu_otel_agent.workloads.pods import ContainerAllocation, PodAllocation
from gpu_otel_agent.workloads.procfs import ProcessFacts, ProcReader

log = logging.getLogger(__name__)
MIB = 1024 * 1024
MPS_LIMIT_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": MIB, "MB": MIB, "G": 1024 * MIB,
          "GB": 1024 * MIB, "T": 1024 * 1024 * MIB, "TB": 1024 * 1024 * MIB}


def _size(text: str) -> int | None:
    text = text.strip().upper()
    digits = text.rstrip("KMGTB")
    unit = text[len(digits):]
    try:
        value = float(digits)
    except ValueError:
        return None
    scale = _UNITS.get(unit)
    return None if scale is None or value < 0 else int(value * scale)


def mps_limit(value: str, gpu_count: int) -> int | None:
    """``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` ("2G" or "0=2G,1=1G") for a one-GPU container."""
    parts = [p for p in value.split(",") if p.strip()]
    if len(parts) == 1 and "=" not in parts[0]:
        return _size(parts[0])
    if gpu_count != 1:
        return None  # CUDA-visible indices: only unambiguous with one GPU
    for part in parts:
        index, _, size = part.partition("=")
        if index.strip() == "0":
            return _size(size)
    return None


class WorkloadResolver:
    def __init__(self, proc: ProcReader, command_line: bool = False,
                 memory_resources: dict[str, int] | None = None) -> None:
        self._proc = proc
        self._command_line = command_line
        self._memory_resources = dict(memory_resources or {})
        self._facts: dict[int, ProcessFacts] = {}
        self._exited: set[int] = set()
        self._pods: tuple[PodAllocation, ...] = ()
        self._claims = ClaimIndex(())  # of the pods in ``_pods``
        self._bound: dict[str, PodAllocation] = {}  # pod UID -> its pod-resources entry
        self._listeners: list[Callable[[], None]] = []
        self._want: Callable[[], None] = lambda: None
        self.wanted: set[tuple[str, str]] = set()  # (namespace, name) of unlisted pods
        self._asked: set[str] = set()  # pod UIDs already reported as unlisted
        self._hidden_reported = False
        self.pods_known = False  # a List answer arrived at least once
        self.resolutions = 0  # /proc reads done (the benchmark reports it)
        self._watchers: list[Callable[[frozenset[int]], None]] = []
        self._watched: frozenset[int] = frozenset()
        self._batches = 0  # open ``batched()`` blocks: watchers are told when the last ends
        # Counts changes that may give a known process another workload (pods, bindings);
        # an exit changes no one else's: attribution keeps the others' identities then.
        self.workloads_generation = 0
        self._watch_pending = False

    # -- events ----------------------------------------------------------------------

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Called after a change that alters the attribution (exit, names)."""
        self._listeners.append(listener)

    def on_watched(self, listener: Callable[[frozenset[int]], None]) -> None:
        """``listener`` gets the PIDs whose exec, exit or fork events matter (the ones we hold
        and the ones that exited since), now and on every change: the event source drops the
        rest as early as it can."""
        self._watchers.append(listener)
        listener(self._watched)

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Lookups inside tell the watchers once, at the end, what changed in all.

        Each PID seen for the first time changes the watched set; told one by one, a list of
        N new processes (the agent's first cycle, a job starting its ranks) built the set and
        the kernel's socket filter N times, O(N²): seconds of CPU at 2,048 processes (issue
        41). The filter follows at the end of the same synchronous block, before the event
        loop reads the socket again."""
        self._batches += 1
        try:
            yield
        finally:
            self._batches -= 1
            if not self._batches and self._watch_pending:
                self._watch_changed()

    def _watch_changed(self) -> None:
        if self._batches:
            self._watch_pending = True
            return
        self._watch_pending = False
        watched = frozenset(self._facts).union(self._exited)
        if watched != self._watched:
            self._watched = watched
            for listener in self._watchers:
                listener(watched)

    def on_unlisted(self, want: Callable[[], None]) -> None:
        """``want`` is called when a pod we see is not in the kubelet's last answer."""
        self._want = want

    def add_pod(self, pod: PodAllocation) -> None:
        """One pod fetched on its own (``Get``), added to the last answer."""
        key = (pod.namespace, pod.name)
        self.wanted.discard(key)
        self._pods = (*(p for p in self._pods if (p.namespace, p.name) != key), pod)
        self._claims = ClaimIndex(self._pods)
        self._changed(workloads=True)

    def _changed(self, workloads: bool) -> None:
        if workloads:
            self.workloads_generation += 1
        for listener in self._listeners:
            listener()

    def on_exit(self, pid: int) -> None:
        if pid in self._facts:
            del self._facts[pid]
            self._exited.add(pid)
            self._changed(workloads=False)

    def on_fork(self, pid: int) -> None:
        """A new process: if its PID was a GPU process that exited, it is someone else now."""
        if pid in self._exited:
            self._exited.discard(pid)
            self._watch_changed()

    def on_exec(self, pid: int) -> None:
        if pid in self._facts or pid in self._exited:
            # Same PID, new program (or a reused PID): read it again at its next sighting.
            self._facts.pop(pid, None)
            self._exited.discard(pid)
            self._watch_changed()

    def on_cgroup_change(self) -> None:
        """A pod or container cgroup appeared: PIDs without an identity may have one now.
        Only their cgroup file is read again (a move changes nothing else)."""
        for pid in [pid for pid, f in self._facts.items() if f.exists and not f.cgroup.known]:
            self._recheck_cgroup(pid)

    def _recheck_cgroup(self, pid: int) -> None:
        """Read ``pid``'s cgroup again: gone means exited, another cgroup a new identity."""
        cgroup = self._proc.cgroup(pid)
        if cgroup is None:
            self.on_exit(pid)
        elif cgroup != self._facts[pid].cgroup:
            self._facts[pid] = replace(self._facts[pid], cgroup=cgroup)

    def on_pod_gone(self, pod_uid: str) -> None:
        if self._bound.pop(pod_uid, None) is not None:
            self._changed(workloads=True)

    def set_pods(self, pods: tuple[PodAllocation, ...]) -> None:
        listed = {(p.namespace, p.name): p for p in pods}
        bound = {}
        for uid, pod in self._bound.items():
            current = listed.get((pod.namespace, pod.name))
            if current is not None:
                bound[uid] = current
        changed = pods != self._pods or len(bound) != len(self._bound)
        self._pods, self._bound = pods, bound
        if changed:
            self._claims = ClaimIndex(pods)
        self.wanted.clear()
        self.pods_known = True
        if changed:
            self._changed(workloads=True)

    def reconcile(self) -> None:
        """Catch what events missed: exits, reused PIDs, cgroup moves of the PIDs we hold."""
        for pid in [p for p in self._exited if self._proc.exists(p)]:
            self._exited.discard(pid)  # a new process has the PID (no event told us)
        for pid in list(self._facts):
            if not self._facts[pid].exists or not self._proc.exists(pid):
                self.on_exit(pid)
                continue
            self._recheck_cgroup(pid)  # one file, not the process's whole facts again
        live_uids = {f.cgroup.pod_uid for f in self._facts.values()}
        for uid in [u for u in self._bound if u not in live_uids]:
            del self._bound[uid]
        self._asked &= live_uids  # an unnamed pod is asked about again after a while
        self._watch_changed()

    def retain(self, pids: set[int]) -> None:
        """Forget PIDs no GPU lists any more (called with the union over all GPUs)."""
        for pid in [p for p in self._facts if p not in pids]:
            del self._facts[pid]
        self._exited &= pids
        self._watch_changed()

    # -- lookups (per cycle: dictionary hits) -------------------------------------------

    def process(self, pid: int) -> ProcessFacts | None:
        """What we know of ``pid``; None once it has exited (its series must go)."""
        if pid in self._exited:
            return None
        facts = self._facts.get(pid)
        if facts is None:
            facts = self._proc.facts(pid, self._command_line)
            self.resolutions += 1
            if not facts.exists and not self._hidden_reported:
                self._hidden_reported = True
                log.warning(
                    "GPU process %d is not visible in %s: the agent does not share the host "
                    "PID namespace (set hostPID: true), so processes are reported without "
                    "names or workloads", pid, "/proc")
            self._facts[pid] = facts
            self._watch_changed()
        return facts

    def workload(self, facts: ProcessFacts, device: GpuDevice) -> Workload:
        cg = facts.cgroup
        if not cg.known:
            return Workload()
        pod = self._pod_for(facts, device) if cg.pod_uid else None
        container = self._container_for(pod, device) if pod else None
        claim = claim_on(container, device) if container else None
        claim_namespace = claim.namespace if claim and pod and claim.namespace and \
            claim.namespace != pod.namespace else None
        return Workload(
            container_id=cg.container_id,
            pod_uid=cg.pod_uid,
            pod_name=sanitize(pod.name) if pod else None,
            namespace=sanitize(pod.namespace) if pod else None,
            container_name=sanitize(container.name) if container else None,
            slurm_job_id=cg.slurm_job_id,
            claim_name=sanitize(claim.name) if claim else None,
            claim_namespace=sanitize(claim_namespace) if claim_namespace else None,
        )

    def device_attributes(self, device: GpuDevice) -> Attributes:
        """What ``device``'s own series carry as the DRA device a listed claim holds."""
        return self._claims.device_attributes(device)

    def memory_limit(self, facts: ProcessFacts, device: GpuDevice) -> int | None:
        """The share of ``device`` the process's container was allocated, where known."""
        pod = self._bound.get(facts.cgroup.pod_uid or "")
        container = self._container_for(pod, device) if pod else None
        gpus = 0
        whole = False
        fractional = 0
        if container is not None:
            for devices in container.devices:
                per_unit = self._memory_resources.get(devices.resource_name)
                if per_unit is not None:
                    fractional += per_unit * len(devices.device_ids)
                for device_id in devices.device_ids:
                    found = match(device_id, device.uuid, device.pci_bus_id, device.aliases)
                    if found is not None:
                        gpus += 1
                        whole = whole or found.whole
            if fractional and gpus <= 1:
                return fractional
            if whole or self._claims.whole(container, device):
                return device.memory_total
        env = dict(facts.environ).get(MPS_LIMIT_ENV)
        if env:
            return mps_limit(env, max(gpus, 1))
        return None

    def _pod_for(self, facts: ProcessFacts, device: GpuDevice) -> PodAllocation | None:
        uid = facts.cgroup.pod_uid
        assert uid is not None
        pod = self._bound.get(uid)
        if pod is not None:
            return pod
        taken = {(p.namespace, p.name) for p in self._bound.values()}
        free = [p for p in self._pods if (p.namespace, p.name) not in taken]
        if facts.hostname:
            named = [p for p in free if p.name == facts.hostname
                     and (not facts.namespace or p.namespace == facts.namespace)]
            if len(named) > 1:
                named = [p for p in named if _allocated(p, device)]
            candidates = named
        else:
            candidates = [p for p in free if _allocated(p, device)]
        if len(candidates) != 1:
            if uid not in self._asked:
                self._asked.add(uid)
                if facts.hostname and facts.namespace:
                    self.wanted.add((facts.namespace, facts.hostname))
                self._want()
            return None
        self._asked.discard(uid)
        self._bound[uid] = candidates[0]
        return candidates[0]

    @staticmethod
    def _container_for(pod: PodAllocation, device: GpuDevice) -> ContainerAllocation | None:
        if len(pod.containers) == 1:
            return pod.containers[0]
        on_device = [c for c in pod.containers if holds(c, device)]
        return on_device[0] if len(on_device) == 1 else None


def _allocated(pod: PodAllocation, device: GpuDevice) -> bool:
    return any(holds(c, device) for c in pod.containers)
