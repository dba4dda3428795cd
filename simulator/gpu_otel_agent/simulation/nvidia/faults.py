"""Faults of the simulated NVML node: what ``chaos``, ``fail`` and the node states accept.

One parser per request shape, shared by the scenario file (``chaos:``, timeline entries)
and the control socket, so both accept exactly the same thing.  The C side is
``nvml_chaos.h``; :class:`FaultControl` binds its ``simnode_chaos_*`` functions.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_otel_agent.simulation.nvidia import nvml_returns

ANY = -1
# Never drawn by `functions: all`: failing them is a start-up or shutdown failure, not chaos
# while running (an explicit list may still name them); nvmlErrorString returns no code.
LIFECYCLE = frozenset({"nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown",
                       "nvmlErrorString"})
_CHAOS_KEYS = ("seed", "rate", "codes", "functions", "devices", "slow_ms", "off")
_FAIL_KEYS = ("device", "function", "code", "count", "field", "off")
MAX_CODES = 16  # CHAOS_CODES in nvml_chaos.h


class FaultSpecError(ValueError):
    """A chaos or fail request is invalid (the message names the key)."""


@dataclass(frozen=True)
class ChaosSpec:
    """Random chaos; ``codes``/``functions``/``devices`` None = documented / all / all."""

    seed: int = 0
    rate: float = 0.0
    codes: tuple[int, ...] | None = None
    functions: tuple[str, ...] | None = None
    devices: tuple[int, ...] | None = None
    slow_rate: float = 0.0
    slow_ms: int = 0
    off: bool = False

    def as_request(self) -> dict[str, object]:
        if self.off:
            return {"off": True}
        return {
            "seed": self.seed,
            "rate": self.rate,
            "codes": list(self.codes) if self.codes is not None else "documented",
            "functions": list(self.functions) if self.functions is not None else "all",
            "devices": list(self.devices) if self.devices is not None else "all",
            "slow_ms": {"rate": self.slow_rate, "ms": self.slow_ms},
        }


@dataclass(frozen=True)
class FailSpec:
    """A targeted fault; None = any function / any device; count None = until cleared."""

    function: str | None
    device: int | None
    code: int
    count: int | None = None
    field: int | None = None
    off: bool = False

    def as_request(self) -> dict[str, object]:
        req: dict[str, object] = {"function": self.function, "device": self.device}
        if self.off:
            req["off"] = True
        else:
            req["code"] = self.code
        if self.count is not None:
            req["count"] = self.count
        if self.field is not None:
            req["field"] = self.field
        return req


def _number(v: object, key: str, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
        raise FaultSpecError(f"{key}: expected a number in [{lo:g}, {hi:g}], got {v!r}")
    return float(v)


def _integer(v: object, key: str, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise FaultSpecError(f"{key}: expected an integer >= {lo}, got {v!r}")
    return v


def parse_code(v: object, key: str = "code") -> int:
    """An nvmlReturn_t by value (999) or name (``NVML_ERROR_UNKNOWN``, ``UNKNOWN``)."""
    values = nvml_returns.code_values()
    if isinstance(v, str):
        name = v.strip().upper()
        for candidate in (name, f"NVML_ERROR_{name}"):
            if candidate in values and candidate != "NVML_SUCCESS":
                return values[candidate]
        if name.isdigit():
            v = int(name)
    if isinstance(v, int) and not isinstance(v, bool) and v in values.values() and v != 0:
        return v
    raise FaultSpecError(f"{key}: not an NVML error code (nvmlReturn_t name or value): {v!r}")


def _list(v: object, key: str) -> list[object]:
    if isinstance(v, str):
        return [s for s in (p.strip() for p in v.split(",")) if s]
    if isinstance(v, list | tuple):
        return list(v)
    raise FaultSpecError(f"{key}: expected a list (or a comma-separated string), got {v!r}")


def parse_chaos(raw: Mapping[str, object], functions: Sequence[str], n_devices: int) -> ChaosSpec:
    unknown = sorted(set(raw) - set(_CHAOS_KEYS))
    if unknown:
        raise FaultSpecError(f"unknown key(s) {', '.join(unknown)}; expected "
                             f"{', '.join(_CHAOS_KEYS)}")
    if raw.get("off") is True:
        if len(raw) > 1:
            raise FaultSpecError("off: takes no other key")
        return ChaosSpec(off=True)
    if "off" in raw and raw["off"] is not False:
        raise FaultSpecError("off: expected true")
    if "rate" not in raw:
        raise FaultSpecError("rate: required (probability that a call fails, 0..1)")
    rate = _number(raw["rate"], "rate", 0, 1)
    seed = _integer(raw.get("seed", 0), "seed")
    if seed >= 2**64:
        raise FaultSpecError("seed: must fit in 64 bits")
    codes: tuple[int, ...] | None = None
    c = raw.get("codes", "documented")
    if c != "documented":
        items = _list(c, "codes")
        if not items or len(items) > MAX_CODES:
            raise FaultSpecError(f"codes: 'documented' or a list of 1..{MAX_CODES} codes")
        codes = tuple(dict.fromkeys(parse_code(x, f"codes[{i}]") for i, x in enumerate(items)))
    fns: tuple[str, ...] | None = None
    f = raw.get("functions", "all")
    if f != "all":
        names = [str(x) for x in _list(f, "functions")]
        bad = [n for n in names if n not in functions]
        if not names or bad:
            raise FaultSpecError(
                f"functions: 'all' or NVML functions the node serves; unknown: {bad or names}"
            )
        fns = tuple(dict.fromkeys(names))
    devs: tuple[int, ...] | None = None
    d = raw.get("devices", "all")
    if d != "all":
        items = _list(d, "devices")
        parsed = [_integer(int(x) if isinstance(x, str) and x.isdigit() else x,
                           f"devices[{i}]") for i, x in enumerate(items)]
        bad_devs = [x for x in parsed if x >= n_devices]
        if not parsed or bad_devs:
            raise FaultSpecError(f"devices: 'all' or indices below {n_devices}; got {items}")
        devs = tuple(dict.fromkeys(parsed))
    slow_rate, slow_ms = 0.0, 0
    s = raw.get("slow_ms")
    if s is not None:
        if not isinstance(s, Mapping) or set(s) - {"rate", "ms"} or "ms" not in s:
            raise FaultSpecError("slow_ms: expected {rate: 0..1, ms: N}")
        slow_rate = _number(s.get("rate", 0), "slow_ms.rate", 0, 1)
        slow_ms = _integer(s["ms"], "slow_ms.ms")
    return ChaosSpec(seed, rate, codes, fns, devs, slow_rate, slow_ms)


def parse_fail(raw: Mapping[str, object], functions: Sequence[str], n_devices: int) -> FailSpec:
    unknown = sorted(set(raw) - set(_FAIL_KEYS) - {"op"})
    if unknown:
        raise FaultSpecError(f"unknown key(s) {', '.join(unknown)}; expected "
                             f"{', '.join(_FAIL_KEYS)}")
    fn = raw.get("function")
    if fn is not None and fn not in functions:
        raise FaultSpecError(f"function: the node does not serve {fn!r}")
    dev = raw.get("device")
    if dev is not None:
        dev = _integer(dev, "device")
        if dev >= n_devices:
            raise FaultSpecError(f"device: no device {dev} (the node has {n_devices})")
    field = raw.get("field")
    if field is not None:
        field = _integer(field, "field")
        if fn is None:
            fn = "nvmlDeviceGetFieldValues"
        if fn != "nvmlDeviceGetFieldValues" or field >= 320:
            raise FaultSpecError("field: a field id (< 320) of nvmlDeviceGetFieldValues")
    count = raw.get("count")
    if count is not None:
        count = _integer(count, "count", 1)
    if raw.get("off") is True:
        return FailSpec(str(fn) if fn else None, dev, 0, None, field, off=True)
    if "code" not in raw:
        raise FaultSpecError("code: required (an nvmlReturn_t name or value), or off: true")
    return FailSpec(str(fn) if fn else None, dev, parse_code(raw["code"]), count, field)


class FaultControl:
    """The node daemon's handle on ``nvml_chaos_ctl.h`` (same library, so the same state)."""

    def __init__(self, library: Path, functions: Mapping[str, int]) -> None:
        lib = ctypes.CDLL(str(library))
        i, u, d, ll, ull = (ctypes.c_int, ctypes.c_uint, ctypes.c_double, ctypes.c_longlong,
                            ctypes.c_ulonglong)
        ip, llp = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_longlong)
        sigs: dict[str, tuple[object, list[object]]] = {
            "chaos_config": (i, [i, ull, d, d, i]),
            "chaos_set_codes": (i, [i, ip, i]),
            "chaos_set_field_codes": (i, [ip, i]),
            "chaos_set_function": (i, [i, i]),
            "chaos_set_device": (i, [i, i]),
            "chaos_commit": (i, []),
            "chaos_fault_add": (i, [i, i, i, i, ll]),
            "chaos_fault_clear": (i, [i, i, i]),
            "chaos_fault_get": (i, [i, llp]),
            "chaos_fault_slots": (i, []),
            "chaos_code_slots": (i, []),
            "chaos_field_ids": (i, []),
            "chaos_slot_code": (i, [i]),
            "chaos_injected": (ull, [i, i]),
            "chaos_slow": (ull, [i]),
            "chaos_field_injected": (ull, [i, i]),
            "gpu_reset": (i, [i]),
            "set_reset_required": (i, [i, i]),
            "driver_reload": (ll, []),
            "driver_generation": (ll, []),
            "max_devices": (i, []),
        }
        del u
        self._c: dict[str, Any] = {}  # ctypes function pointers
        for name, (res, args) in sigs.items():
            fn = getattr(lib, "simnode_" + name)
            fn.restype = res
            fn.argtypes = args
            self._c[name] = fn
        self.functions = dict(functions)
        self._names = {v: k for k, v in self.functions.items()}
        self.spec = ChaosSpec(off=True)

    def _ok(self, rc: int, what: str) -> int:
        if rc < 0:
            raise ValueError(f"{what} failed ({rc})")
        return rc

    @staticmethod
    def _ints(values: Sequence[int]) -> ctypes.Array[ctypes.c_int]:
        return (ctypes.c_int * max(1, len(values)))(*values)

    def apply_chaos(self, spec: ChaosSpec, n_devices: int) -> None:
        c = self._c
        if spec.off:
            self._ok(c["chaos_config"](0, 0, 0.0, 0.0, 0), "chaos off")
            c["chaos_commit"]()
            self.spec = spec
            return
        chosen = set(spec.functions) if spec.functions is not None else None
        common = self.field_codes()
        for name, fid in self.functions.items():
            on = name in chosen if chosen is not None else name not in LIFECYCLE
            self._ok(c["chaos_set_function"](fid, int(on)), name)
            codes = (list(spec.codes) if spec.codes is not None
                     else common if nvml_returns.may_return_any(name)
                     else self._documented(name))
            self._ok(c["chaos_set_codes"](fid, self._ints(codes), len(codes)), name)
        field_codes = list(spec.codes) if spec.codes is not None else common
        self._ok(c["chaos_set_field_codes"](self._ints(field_codes), len(field_codes)), "fields")
        max_dev = int(c["max_devices"]())
        for dev in range(max_dev + 1):
            # The last column: calls without a device (nvmlDeviceGetCount, an event set
            # spanning several GPUs): a fault there reaches every GPU, so it is on only when
            # no device is named. GPM samples and one-GPU event sets count as their GPU's.
            on = spec.devices is None or dev in spec.devices
            self._ok(c["chaos_set_device"](dev, int(on)), f"device {dev}")
        del n_devices
        self._ok(c["chaos_config"](1, spec.seed, spec.rate, spec.slow_rate, spec.slow_ms), "chaos")
        c["chaos_commit"]()
        self.spec = spec

    @staticmethod
    def _documented(name: str) -> list[int]:
        values = nvml_returns.code_values()
        return [values[n] for n in nvml_returns.injectable(name)][:MAX_CODES]

    def field_codes(self) -> list[int]:
        """Per-field codes under ``documented``: nvml.h lists none for a field's nvmlReturn,
        so those injectable for every device getter of the node (in NVML 13: UNKNOWN). The
        same for a function whose @return is "Nonzero NVML_ERROR_? enum on error" (GPM),
        which chaos could not reach while it drew from an empty list."""
        sets = [set(nvml_returns.injectable(n)) for n in self.functions
                if n.startswith("nvmlDevice") and nvml_returns.injectable(n)]
        common = set.intersection(*sets) if sets else set()
        values = nvml_returns.code_values()
        return sorted(values[n] for n in common)

    def add_fault(self, f: FailSpec) -> None:
        if f.off:  # clears every fault matching the keys given (absent = any)
            self._c["chaos_fault_clear"](
                self.functions[f.function] if f.function else -2,
                f.device if f.device is not None else -2,
                f.field if f.field is not None else -2,
            )
            return
        fid = self.functions[f.function] if f.function else ANY
        dev = f.device if f.device is not None else ANY
        field = f.field if f.field is not None else ANY
        count = f.count if f.count is not None else -1
        rc = int(self._c["chaos_fault_add"](fid, dev, field, f.code, count))
        if rc == -3:
            raise ValueError("too many targeted faults at once (64); clear some with off")
        self._ok(rc, "fail")

    def clear_faults(self) -> int:
        return int(self._c["chaos_fault_clear"](-2, -2, -2))

    def gpu_reset(self, dev: int) -> None:
        self._ok(self._c["gpu_reset"](dev), "reset")

    def set_reset_required(self, dev: int, on: bool) -> None:
        self._ok(self._c["set_reset_required"](dev, int(on)), "reset_required")

    def driver_reload(self) -> int:
        return self._ok(int(self._c["driver_reload"]()), "driver reload")

    def stats(self, device_index: Mapping[int, int]) -> dict[str, object]:
        """Injected errors per function and code, slow calls, per-field errors, faults."""
        c, names = self._c, nvml_returns.code_names()
        slots = int(c["chaos_code_slots"]())

        def code_name(slot: int) -> str:
            code = int(c["chaos_slot_code"](slot))
            return names.get(code, str(code))

        injected: dict[str, dict[str, int]] = {}
        slow: dict[str, int] = {}
        for fid, name in self._names.items():
            for slot in range(slots):
                n = int(c["chaos_injected"](fid, slot))
                if n:
                    injected.setdefault(name, {})[code_name(slot)] = n
            n = int(c["chaos_slow"](fid))
            if n:
                slow[name] = n
        fields: dict[str, dict[str, int]] = {}
        for fld in range(int(c["chaos_field_ids"]())):
            for slot in range(slots):
                n = int(c["chaos_field_injected"](fld, slot))
                if n:
                    fields.setdefault(str(fld), {})[code_name(slot)] = n
        faults: list[dict[str, object]] = []
        buf = (ctypes.c_longlong * 7)()
        for i in range(int(c["chaos_fault_slots"]())):
            c["chaos_fault_get"](i, buf)
            if not buf[0]:
                continue
            faults.append({
                "function": self._names.get(int(buf[1])) if buf[1] >= 0 else None,
                "device": device_index.get(int(buf[2]), int(buf[2])) if buf[2] >= 0 else None,
                "field": int(buf[3]) if buf[3] >= 0 else None,
                "code": names.get(int(buf[4]), str(buf[4])),
                "remaining": int(buf[5]) if buf[5] >= 0 else None,
                "hits": int(buf[6]),
            })
        spec = self.spec
        return {
            "enabled": not spec.off,
            "config": spec.as_request(),
            "injected": injected,
            "injected_total": sum(sum(v.values()) for v in injected.values()),
            "slow": slow,
            "slow_total": sum(slow.values()),
            "field_injected": fields,
            "field_injected_total": sum(sum(v.values()) for v in fields.values()),
            "faults": faults,
            "driver_generation": int(c["driver_generation"]()),
        }
