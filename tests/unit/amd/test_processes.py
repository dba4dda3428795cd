"""AMD per-process utilization: engine-time counters turned into fractions of wall time."""

from __future__ import annotations

from typing import Any

from gpu_otel_agent.plugins.amd.processes import MIN_WINDOW_NS, ProcessSampler


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


def _proc(pid: int, gfx_ns: int, enc_ns: Any = 0, vram: Any = 1 << 20) -> dict[str, Any]:
    return {"pid": pid, "engine_usage": {"gfx": gfx_ns, "enc": enc_ns},
            "memory_usage": {"vram_mem": vram, "gtt_mem": 0, "cpu_mem": 0}}


def test_fraction_over_a_full_window_absent_before_and_kept_between() -> None:
    clock = Clock()
    listing = [_proc(7, 0)]
    sampler = ProcessSampler(lambda: listing, clock)
    (first,) = sampler.read()
    assert first.utilization == () and first.memory_bytes == 1 << 20  # no window yet

    clock.ns += MIN_WINDOW_NS // 5
    listing = [_proc(7, 50_000_000)]
    assert sampler.read()[0].utilization == ()  # too short a window: nothing invented

    clock.ns += MIN_WINDOW_NS  # 600 ms since the start, 300 ms of GFX time, 60 ms encode
    listing = [_proc(7, 300_000_000, 60_000_000)]
    (p,) = sampler.read()
    assert dict(p.utilization) == {"general": 0.5, "encoder": 0.1}

    clock.ns += MIN_WINDOW_NS // 5
    listing = [_proc(7, 310_000_000, 60_000_000)]
    assert dict(sampler.read()[0].utilization) == {"general": 0.5, "encoder": 0.1}


def test_na_values_and_departed_processes() -> None:
    clock = Clock()
    listing = [_proc(1, 0, "N/A", "N/A"), _proc(2, 0)]
    sampler = ProcessSampler(lambda: listing, clock)
    sampler.read()
    clock.ns += MIN_WINDOW_NS
    listing = [_proc(1, MIN_WINDOW_NS * 2, "N/A", "N/A")]  # pid 2 left; pid 1 over 100 %
    (p,) = sampler.read()
    assert p.pid == 1 and p.memory_bytes is None
    assert dict(p.utilization) == {"general": 1.0}  # clamped; no encoder figure at all
    clock.ns += MIN_WINDOW_NS
    listing = [_proc(2, 10)]
    assert sampler.read()[0].utilization == ()  # a returning pid starts afresh


class HostileSmi:
    """amdsmi's process list as the wrapper returns it, with names a process chose itself."""

    class AmdSmiException(Exception):
        pass

    def amdsmi_get_gpu_process_list(self, handle: object) -> list[dict[str, object]]:
        return [
            {"pid": 7, "name": "evil\nname\x1b[31m"},
            {"pid": 8, "name": b"bad\xff".decode("utf-8", "surrogateescape") + "x" * 10_000},
            {"pid": 9, "name": "N/A"},
        ]


def test_health_event_names_from_amdsmi_are_sanitised() -> None:
    from gpu_otel_agent.plugins.amd.processes import amd_process_lookup

    lookup = amd_process_lookup(HostileSmi(), {"GPU-A": object()})
    names = {p.pid: p.executable for p in lookup.processes_on("GPU-A")}
    assert names[7] == "evil name [31m"
    assert len(names[8]) <= 128 and names[8].endswith("…")
    assert names[9] == ""
    assert all(name.isprintable() for name in names.values())
