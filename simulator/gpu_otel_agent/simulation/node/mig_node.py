"""The node daemon's side of MIG: creating, reconfiguring and feeding GPU instances.

The node holds, per MIG-enabled GPU, its GPU instances in creation order (the scenario's ``mig``
list, then what ``gpu-agent sim mig --set`` made of it), each with its compute instances; a
compute instance is one MIG device (one slot of the library: its MIG device index, its handle,
its MIG- UUID). Memory belongs to the GPU instance: its readings are written into every compute
instance of it, and the GPU's used memory is the sum over GPU instances (not over MIG devices).

A GPU instance without an id in the scenario gets one from the range real GPUs give its size
(``mig_profiles.placement_id``: that of its first free memory placement).

Reconfiguration keeps the GPU instances whose profile is still wanted, destroys the others and
creates the missing ones (with one compute instance spanning each, ids as above), as an
administrator would with ``nvidia-smi mig -dci/-dgi/-cgi -C``; destroying an instance a process
runs on is refused (NVML_ERROR_IN_USE from nvmlGpuInstanceDestroy), and nothing changes.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gpu_otel_agent.simulation.node.scenario import (
    MIG_INDEX_LIMIT,
    ComputeInstanceSpec,
    MigSpec,
    Value,
)
from gpu_otel_agent.simulation.nvidia import nvml_control
from gpu_otel_agent.simulation.nvidia.mig_profiles import (
    ComputeProfile,
    MigProfile,
    check,
    compute_profile,
    first_placement,
    memory_mib,
    mig_model,
    placement_id,
    placement_of,
)

Evaluate = Callable[[Value, float, random.Random], float | None]
_GI_ONLY = frozenset({"memory_used_mib"})  # the GPU instance's, shared by its compute instances


@dataclass
class ComputeInstance:
    slot: int  # its MIG device index
    ci: int
    profile: ComputeProfile
    uuid: str
    readings: dict[str, Value] = field(default_factory=dict)
    sram_errors: int = 0  # its uncorrectable volatile SRAM ECC errors (served per instance)


@dataclass
class Instance:
    """One GPU instance."""

    gi: int
    profile: MigProfile
    computes: list[ComputeInstance]
    readings: dict[str, Value] = field(default_factory=dict)
    placement: int | None = None  # its first memory slice (None: an id of no placement)

    @property
    def slices_held(self) -> set[int]:
        size = self.profile.memory_slices
        return set() if self.placement is None else set(range(self.placement,
                                                              self.placement + size))

    @property
    def uuid(self) -> str:
        """Its first compute instance's (the one MIG device of a GPU instance with one)."""
        return self.computes[0].uuid


@dataclass
class _Gpu:
    local: int  # the device's index in the NVML library
    model: str
    parent_uuid: str
    memory_mib: float
    instances: list[Instance] = field(default_factory=list)

    def free_indices(self, reserved: set[int]) -> list[int]:
        used = {c.slot for i in self.instances for c in i.computes} | reserved
        return [n for n in range(MIG_INDEX_LIMIT) if n not in used]


class MigNode:
    """All MIG-enabled GPUs of one node (call with the node's lock held)."""

    def __init__(self, lib: nvml_control.NodeLib) -> None:
        self._lib = lib
        self._gpus: dict[int, _Gpu] = {}  # scenario device index -> its MIG state
        self._created = 0  # MIG devices made so far: a new one gets a new UUID

    def enable(self, dev: int, local: int, model: str, *, parent_uuid: str,
               memory_mib_total: float, specs: Sequence[MigSpec]) -> None:
        """MIG mode on for ``dev`` with the scenario's instances."""
        self._lib.mig_enable(local, True)
        gpu = _Gpu(local, model, parent_uuid, memory_mib_total)
        self._gpus[dev] = gpu
        profiles = check(model, [s.profile for s in specs])
        # Explicit ids and indices first, so a default never takes one named later.
        taken_gi = {s.gpu_instance_id for s in specs if s.gpu_instance_id is not None}
        held = {n for p, s in zip(profiles, specs, strict=True) if s.gpu_instance_id is not None
                for n in _slices(p, placement_of(p, s.gpu_instance_id))}
        reserved = {c.mig_index for s in specs for c in s.compute_instances
                    if c.mig_index is not None}
        for profile, spec in zip(profiles, specs, strict=True):
            gi = spec.gpu_instance_id
            if gi is None:
                gi = self._default_gi(gpu, profile, taken_gi, held)
            self._create(gpu, profile, gi, spec, reserved)

    def enabled(self, dev: int) -> bool:
        return dev in self._gpus

    def instances(self, dev: int) -> tuple[Instance, ...]:
        gpu = self._gpus.get(dev)
        return tuple(gpu.instances) if gpu is not None else ()

    def gi_of(self, dev: int, position: int) -> int:
        """The GPU instance id of the ``position``-th instance of ``dev`` (ValueError if none)."""
        return self.place_of(dev, position, None)[0]

    def place_of(self, dev: int, position: int, ci_position: int | None) -> tuple[int, int]:
        """(GPU instance id, compute instance id) of the ``ci_position``-th compute instance
        (None: the first) of the ``position``-th GPU instance of ``dev`` (ValueError if none)."""
        found = self.instances(dev)
        if not self.enabled(dev):
            raise ValueError(f"device {dev} is not in MIG mode")
        if not 0 <= position < len(found):
            raise ValueError(f"device {dev} has {len(found)} MIG instance(s), no {position}")
        instance = found[position]
        n = 0 if ci_position is None else ci_position
        if not 0 <= n < len(instance.computes):
            raise ValueError(f"GPU instance {instance.gi} has {len(instance.computes)} compute "
                             f"instance(s), no {n}")
        return instance.gi, instance.computes[n].ci

    def sram_error(self, dev: int, position: int, ci_position: int | None) -> tuple[int, int]:
        """One more uncorrectable SRAM ECC error on a compute instance (the count NVML keeps
        per MIG device); its (GPU instance id, compute instance id)."""
        gi, ci = self.place_of(dev, position, ci_position)
        gpu = self._gpus[dev]
        compute = next(c for i in gpu.instances if i.gi == gi for c in i.computes if c.ci == ci)
        compute.sram_errors += 1
        self._lib.mig_set_reading(gpu.local, compute.slot, "ecc_dbe_volatile",
                                  float(compute.sram_errors))
        return gi, ci

    @staticmethod
    def _default_gi(gpu: _Gpu, profile: MigProfile, taken: set[int], held: set[int]) -> int:
        """An id from the range a real GPU gives the profile's size: that of its first free
        memory placement (mig_profiles.placement_id); the lowest free id where none is left."""
        used_ids = {i.gi for i in gpu.instances} | taken
        used_slices = held.union(*(i.slices_held for i in gpu.instances))
        start = first_placement(profile, used_slices)
        if start is not None and placement_id(profile, start) not in used_ids:
            return placement_id(profile, start)
        return next(n for n in range(64) if n not in used_ids)

    def _create(self, gpu: _Gpu, profile: MigProfile, gi: int, spec: MigSpec | None,
                reserved: set[int]) -> None:
        computes_spec = spec.compute_instances if spec is not None else (ComputeInstanceSpec(),)
        total = spec.memory_total_mib if spec is not None else None
        if total is None:
            total = memory_mib(profile, gpu.memory_mib, gpu.model)
        sms = mig_model(gpu.model).sms_per_slice
        instance = Instance(gi, profile, [], dict(spec.readings) if spec is not None else {},
                            placement_of(profile, gi))
        gpu.instances.append(instance)
        for n, c in enumerate(computes_spec):
            ci_profile = compute_profile(profile, c.profile)
            ci = c.compute_instance_id if c.compute_instance_id is not None else n
            index = c.mig_index
            if index is None:
                free = gpu.free_indices(reserved)
                if not free:
                    raise ValueError(f"no free MIG device index on GPU {gpu.local}")
                index = free[0]
            self._created += 1
            name = f"{gpu.parent_uuid}/{gi}/{ci}/{self._created}"
            mig_uuid = c.uuid or f"MIG-{uuidlib.uuid5(uuidlib.NAMESPACE_OID, name)}"
            slot = self._lib.mig_create(gpu.local, nvml_control.MigDeviceSpec(
                index=index, gi=gi, ci=ci, profile=ci_profile.name,
                profile_id=profile.profile_id, gi_slices=profile.slices,
                ci_slices=ci_profile.slices, memory_mib=total,
                sm_count=float(profile.sms if ci_profile.slices == profile.slices and profile.sms
                               else ci_profile.slices * sms), uuid=mig_uuid))
            instance.computes.append(ComputeInstance(slot, ci, ci_profile, mig_uuid,
                                                     dict(c.readings)))

    def reconfigure(self, dev: int, names: Sequence[str], busy: Mapping[int, int]) -> list[str]:
        """Make ``dev``'s instances ``names``; ``busy`` maps a GI id to a PID running on it.

        Returns the UUIDs of the MIG devices now. Raises ValueError (nothing changed) if the
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
            for compute in instance.computes:
                self._lib.mig_destroy(gpu.local, compute.slot)
        gpu.instances = keep
        for profile in wanted:
            self._create(gpu, profile, self._default_gi(gpu, profile, set(), set()), None, set())
        self._lib.push_event(gpu.local, nvml_control.EVENT_MIG_CONFIG_CHANGE, 0)
        return [c.uuid for i in gpu.instances for c in i.computes]

    def apply(self, t: float, rng: random.Random, evaluate: Evaluate) -> dict[int, float]:
        """Write every instance's readings; returns each GPU's used memory (the sum over its
        GPU instances: compute instances share theirs)."""
        used: dict[int, float] = {}
        for dev, gpu in self._gpus.items():
            total = 0.0
            for instance in gpu.instances:
                shared: dict[str, float] = {}
                for name, value in instance.readings.items():
                    number = evaluate(value, t, rng)
                    if number is not None:
                        shared[name] = number
                total += shared.get("memory_used_mib", 0.0)
                for compute in instance.computes:
                    own = dict(shared)
                    for name, value in compute.readings.items():
                        number = evaluate(value, t, rng)
                        if number is not None and name not in _GI_ONLY:
                            own[name] = number
                    for name, number in own.items():
                        self._lib.mig_set_reading(gpu.local, compute.slot, name, number)
            used[dev] = total
        return used


def _slices(profile: MigProfile, start: int | None) -> set[int]:
    return set() if start is None else set(range(start, start + profile.memory_slices))
