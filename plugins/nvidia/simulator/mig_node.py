"""The node daemon's side of MIG: creating, reconfiguring and feeding GPU instances.

The node holds, per MIG-enabled GPU, its instances in creation order (the scenario's ``mig``
list, then what ``gpu-agent sim mig --set`` made of it). Reconfiguration keeps the instances
whose profile is still wanted, destroys the others and creates the missing ones, as an
administrator would with ``nvidia-smi mig -dci/-dgi/-cgi``; destroying an instance a process
runs on is refused (NVML_ERROR_IN_USE from nvmlGpuInstanceDestroy), and nothing changes.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gpu_otel_agent.plugins.nvidia.simulator import _lib
from gpu_otel_agent.plugins.nvidia.simulator.mig_profiles import (
    MigProfile,
    check,
    memory_mib,
    sm_count,
)
from gpu_otel_agent.plugins.nvidia.simulator.scenario import MigSpec, Value

Evaluate = Callable[[Value, float, random.Random], float | None]


@dataclass
class Instance:
    slot: int
    gi: int
    profile: MigProfile
    uuid: str
    readings: dict[str, Value] = field(default_factory=dict)


@dataclass
class _Gpu:
    local: int  # the device's index in the NVML library
    model: str
    parent_uuid: str
    memory_mib: float
    instances: list[Instance] = field(default_factory=list)


class MigNode:
    """All MIG-enabled GPUs of one node (call with the node's lock held)."""

    def __init__(self, lib: _lib.NodeLib) -> None:
        self._lib = lib
        self._gpus: dict[int, _Gpu] = {}  # scenario device index -> its MIG state
        self._created = 0  # instances made so far: a new instance gets a new UUID

    def enable(self, dev: int, local: int, model: str, *, parent_uuid: str,
               memory_mib_total: float, specs: Sequence[MigSpec]) -> None:
        """MIG mode on for ``dev`` with the scenario's instances."""
        self._lib.mig_enable(local, True)
        gpu = _Gpu(local, model, parent_uuid, memory_mib_total)
        self._gpus[dev] = gpu
        for profile, spec in zip(check(model, [s.profile for s in specs]), specs, strict=True):
            self._create(gpu, profile, dict(spec.readings))

    def enabled(self, dev: int) -> bool:
        return dev in self._gpus

    def instances(self, dev: int) -> tuple[Instance, ...]:
        gpu = self._gpus.get(dev)
        return tuple(gpu.instances) if gpu is not None else ()

    def gi_of(self, dev: int, position: int) -> int:
        """The GPU instance id of the ``position``-th instance of ``dev`` (ValueError if none)."""
        found = self.instances(dev)
        if not self.enabled(dev):
            raise ValueError(f"device {dev} is not in MIG mode")
        if not 0 <= position < len(found):
            raise ValueError(f"device {dev} has {len(found)} MIG instance(s), no {position}")
        return found[position].gi

    def _create(self, gpu: _Gpu, profile: MigProfile, readings: dict[str, Value]) -> None:
        used = {i.gi for i in gpu.instances}
        gi = next(n for n in range(1, 64) if n not in used)  # the lowest free id, as NVML does
        self._created += 1
        name = f"{gpu.parent_uuid}/{gi}/{self._created}"
        mig_uuid = f"MIG-{uuidlib.uuid5(uuidlib.NAMESPACE_OID, name)}"
        slot = self._lib.mig_create(gpu.local, gi, profile.name, profile.profile_id,
                                    profile.slices, memory_mib(profile, gpu.memory_mib),
                                    sm_count(profile, gpu.model), mig_uuid)
        gpu.instances.append(Instance(slot, gi, profile, mig_uuid, readings))

    def reconfigure(self, dev: int, names: Sequence[str], busy: Mapping[int, int]) -> list[str]:
        """Make ``dev``'s instances ``names``; ``busy`` maps a GI id to a PID running on it.

        Returns the UUIDs of the instances now. Raises ValueError (nothing changed) if the
        configuration does not fit or would destroy an instance in use.
        """
        gpu = self._gpus.get(dev)
        if gpu is None:
            raise ValueError(f"device {dev} is not in MIG mode (give it 'mig:' in the scenario)")
        wanted = list(check(gpu.model, names))
        keep: list[Instance] = []
        for instance in gpu.instances:
            if instance.profile in wanted:
                wanted.remove(instance.profile)
                keep.append(instance)
        doomed = [i for i in gpu.instances if i not in keep]
        for instance in doomed:
            if instance.gi in busy:
                raise ValueError(f"GPU instance {instance.gi} ({instance.profile.name}) is in "
                                 f"use by pid {busy[instance.gi]}: NVML_ERROR_IN_USE")
        for instance in doomed:
            self._lib.mig_destroy(gpu.local, instance.slot)
        gpu.instances = keep
        for profile in wanted:
            self._create(gpu, profile, {})
        self._lib.push_event(gpu.local, _lib.EVENT_MIG_CONFIG_CHANGE, 0)
        return [i.uuid for i in gpu.instances]

    def apply(self, t: float, rng: random.Random, evaluate: Evaluate) -> dict[int, float]:
        """Write every instance's readings; returns each GPU's used memory (their sum)."""
        used: dict[int, float] = {}
        for dev, gpu in self._gpus.items():
            total = 0.0
            for instance in gpu.instances:
                for name, value in instance.readings.items():
                    number = evaluate(value, t, rng)
                    if number is None:
                        continue
                    self._lib.mig_set_reading(gpu.local, instance.slot, name, number)
                    if name == "memory_used_mib":
                        total += number
            used[dev] = total
        return used
