"""Gray-failure conditions, debounce and hysteresis, siblings and subsystems, as pure functions
over readings (the end-to-end path is tests/integration/test_gray_failures.py)."""

from __future__ import annotations

import math

import pytest

from gpu_otel_agent.gpu_health import gray, siblings, subsystems
from gpu_otel_agent.gpu_health.debounce import Debounce, DebounceSettings
from gpu_otel_agent.gpu_health.verdict import EngineView, HealthBoard
from gpu_otel_agent.gpu_health.watch import GrayWatch
from gpu_otel_agent.local.health import health_view
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    HealthState,
    HeldCondition,
    Reading,
    SnapshotStore,
)

BUSY = Reading("hw.gpu.utilization", 0.9, (("hw.gpu.task", "general"),))
IDLE = Reading("hw.gpu.utilization", 0.0, (("hw.gpu.task", "general"),))


def spec(name: str) -> gray.ConditionSpec:
    return next(c for c in gray.CONDITIONS if c.name == name)


def judge(name: str, *readings: Reading, active: bool = False,
          before: tuple[Reading, ...] | None = None, seconds: float = 60.0) -> gray.Verdict:
    previous = gray.Reads(before, 0.0) if before is not None else None
    return spec(name).evaluate(gray.Reads(readings, seconds, previous), active)


def pcie(gen: int, width: int) -> tuple[Reading, ...]:
    return (Reading("gpu.pcie.link.generation", gen), Reading("gpu.pcie.link.max_generation", 5),
            Reading("gpu.pcie.link.width", width), Reading("gpu.pcie.link.max_width", 16))


def test_an_idle_gpu_that_lowers_its_link_is_not_judged_a_busy_one_is() -> None:
    assert judge("pcie_link_generation", IDLE, *pcie(1, 16)).bad is None
    assert judge("pcie_link_width", IDLE, *pcie(5, 4)).bad is None
    assert judge("pcie_link_generation", BUSY, *pcie(1, 16)).bad is True
    assert judge("pcie_link_width", BUSY, *pcie(5, 8)).bad is True
    assert judge("pcie_link_width", BUSY, *pcie(5, 16)).bad is False
    assert judge("pcie_link_width", BUSY).bad is None  # no readings: cannot tell


def test_pcie_replay_bound_is_dcgms_per_lane_rate_times_lanes() -> None:
    # DcgmHealthWatch: gen 4 x16 = ceil(0.96 * 16) = 16 replays/min; gen 5 x16 = ceil(30.72)
    assert gray.expected_replays_per_min(4, 16) == 16
    assert gray.expected_replays_per_min(5, 16) == 31
    assert gray.expected_replays_per_min(9, 1) == math.ceil(3.84)  # capped at the last known
    at = (*pcie(4, 16), Reading("gpu.pcie.replay", 100))
    start = (Reading("gpu.pcie.replay", 84),)
    assert judge("pcie_replay_rate", *at, before=start).bad is False  # 16/min: at the bound
    at = (*pcie(4, 16), Reading("gpu.pcie.replay", 101))
    assert judge("pcie_replay_rate", *at, before=start).bad is True
    # Raised, it clears only at half the bound (8/min), not just under it.
    at = (*pcie(4, 16), Reading("gpu.pcie.replay", 94))
    assert judge("pcie_replay_rate", *at, before=start, active=True).bad is True
    assert judge("pcie_replay_rate", *at, before=start).bad is False
    back = (*pcie(4, 16), Reading("gpu.pcie.replay", 10))  # went backwards: a reset
    assert judge("pcie_replay_rate", *back, before=start).bad is None


def link(index: int, state: int) -> Reading:
    return Reading("gpu.nvlink.link.state", state, (("gpu.nvlink.link", index),))


def test_nvlink_sleep_is_a_power_state_inactive_and_traffic_disabled_are_down() -> None:
    assert judge("nvlink_link_down", link(0, 1), link(1, 2)).bad is False
    verdict = judge("nvlink_link_down", link(0, 1), link(1, 0), link(2, 3))
    assert verdict.bad is True and verdict.detail == "NVLink link(s) 1, 2 down of 3"
    assert judge("nvlink_link_down").bad is None  # a GPU without NVLink


def errors(crc: float, replay: float = 0, recovery: float = 0) -> tuple[Reading, ...]:
    return tuple(Reading("gpu.nvlink.errors", v, (("error.type", k),))
                 for k, v in (("crc_flit", crc), ("replay", replay), ("recovery", recovery)))


def test_nvlink_crc_needs_100_per_second_replay_and_recovery_any() -> None:
    assert judge("nvlink_errors", *errors(5999), before=errors(0)).bad is False  # 99.98/s
    assert judge("nvlink_errors", *errors(6000), before=errors(0)).bad is True
    assert judge("nvlink_errors", *errors(2400), before=errors(0), active=True).bad is False
    assert judge("nvlink_errors", *errors(0, replay=1), before=errors(0)).bad is True
    assert judge("nvlink_errors", *errors(0, recovery=2), before=errors(0)).bad is True


def per_link(link_index: int, kind: str, count: float) -> Reading:
    return Reading("gpu.nvlink.link.errors", count,
                   (("gpu.nvlink.link", link_index), ("error.type", kind)))


def test_nvlink_errors_name_the_links_whose_replay_or_recovery_grew() -> None:
    before = (*errors(0), per_link(3, "recovery", 0), per_link(7, "recovery", 0),
              per_link(7, "replay", 0), per_link(9, "crc_flit", 0))
    now = (*errors(50, replay=4, recovery=2), per_link(3, "recovery", 0),
           per_link(7, "recovery", 2), per_link(7, "replay", 4), per_link(9, "crc_flit", 50))
    verdict = judge("nvlink_errors", *now, before=before)
    assert verdict.bad is True
    assert "(link 7 recovery, link 7 replay)" in verdict.detail  # not 3, not 9's CRC


def fabric(state: str, *faults: tuple[str, int]) -> tuple[Reading, ...]:
    states = ("not_supported", "not_started", "in_progress", "completed", "failed")
    return (*(Reading("gpu.fabric.status", int(s == state), (("gpu.fabric.state", s),))
              for s in states),
            *(Reading("gpu.fabric.fault", held, (("gpu.fabric.fault.type", name),))
              for name, held in faults))


def test_fabric_faults_and_failed_registrations_are_judged_as_dcgm_does() -> None:
    assert judge("fabric_unhealthy").bad is None  # a GPU outside a fabric
    healthy = judge("fabric_unhealthy", *fabric("completed", ("route_unhealthy", 0)))
    assert healthy.bad is False
    unhealthy = judge("fabric_unhealthy", *fabric("completed", ("route_unhealthy", 1),
                                                  ("degraded_bandwidth", 1)))
    assert unhealthy.bad is True
    assert unhealthy.detail == ("fabric fault degraded_bandwidth, fabric fault route_unhealthy")
    assert judge("fabric_unhealthy", *fabric("failed")).bad is True
    assert judge("fabric_unhealthy", *fabric("not_started")).bad is True
    assert judge("fabric_unhealthy", *fabric("in_progress")).bad is False  # FM still training


def clocks(sm_mhz: float, *reasons: str) -> tuple[Reading, ...]:
    return (Reading("gpu.clock.frequency", sm_mhz * 1e6, (("gpu.clock.domain", "sm"),)),
            Reading("gpu.clock.limit", 1980e6, (("gpu.clock.domain", "sm"),)),
            *(Reading("gpu.clock.throttle", 1, (("gpu.clock.throttle.reason", r),))
              for r in reasons))


def test_low_clocks_count_under_load_without_a_reason_only() -> None:
    assert judge("sm_clock_low", BUSY, *clocks(1000)).bad is True
    assert judge("sm_clock_low", BUSY, *clocks(1000, "sw_power_cap")).bad is False
    assert judge("sm_clock_low", IDLE, *clocks(1000)).bad is None
    assert judge("sm_clock_low", BUSY, *clocks(1500)).bad is False  # 76 %: above 70 %
    assert judge("sm_clock_low", BUSY, *clocks(1500), active=True).bad is True  # below 80 %


def temp(celsius: float) -> tuple[Reading, ...]:
    return (Reading("hw.temperature", celsius, (("hw.sensor_location", "gpu"),)),
            Reading("hw.temperature.limit", 90, (("hw.limit_type", "high.degraded"),)))


def test_thermal_margin_has_a_three_degree_band() -> None:
    assert judge("thermal_margin", *temp(84)).bad is False
    assert judge("thermal_margin", *temp(85)).bad is True
    assert judge("thermal_margin", *temp(83), active=True).bad is True
    assert judge("thermal_margin", *temp(82), active=True).bad is False


def test_debounce_raises_after_n_bad_clears_after_m_good_and_ignores_unknown() -> None:
    d = Debounce(DebounceSettings(degrade_after=3, clear_after=2))
    assert [d.observe(b) for b in (True, True, None, False, True, True, True)] == [
        None, None, None, None, None, None, True]
    assert [d.observe(b) for b in (False, None, True, False, False)] == [
        None, None, None, None, False]
    with pytest.raises(ValueError):
        DebounceSettings(degrade_after=0)


def test_a_temperature_oscillating_at_the_threshold_raises_once_and_never_clears() -> None:
    watch = GrayWatch(DebounceSettings(degrade_after=2, clear_after=2))
    changes = []
    for step in range(200):
        celsius = 85 + 1.5 * math.sin(step * 0.7)  # 83.5 .. 86.5 around the 85 C line
        changes += watch.update(temp(celsius), float(step), None, [])
    assert [(c.condition, c.active) for c in changes] == [("thermal_margin", True)]


def test_a_burst_of_errors_between_two_reads_raises_and_then_clears() -> None:
    watch = GrayWatch(DebounceSettings(degrade_after=3, clear_after=2))
    flips = []
    for step, crc in enumerate((0, 0, 10_000_000, *([10_000_000] * 8))):
        flips += [(step, c.active) for c in watch.update(errors(crc), float(step), None, [])]
    assert flips == [(4, True), (6, False)]  # three bad reads, then the burst leaves the window


def peer(util: float | None, clock: float | None, watts: float | None) -> siblings.Peer:
    return siblings.Peer("H100", util, clock, watts)


def test_a_slow_sibling_is_judged_against_enough_comparable_peers_only() -> None:
    others = [peer(0.9, 1980e6, 500), peer(0.92, 1975e6, 510), peer(0.88, 1980e6, 505)]
    slow = peer(0.9, 1500e6, 500)
    assert siblings.sm_clock(slow, others, False).bad is True
    assert siblings.sm_clock(peer(0.9, 1800e6, 500), others, False).bad is False  # 91 %
    assert siblings.sm_clock(peer(0.9, 1800e6, 500), others, True).bad is True  # < 92 %
    assert siblings.sm_clock(slow, others[:1], False).bad is None  # one peer cannot say
    assert siblings.sm_clock(peer(0.5, 1500e6, 500), others, False).bad is None  # not comparable
    other_model = [siblings.Peer("A100", 0.9, 1410e6, 400)] * 3
    assert siblings.sm_clock(slow, other_model, False).bad is None
    assert siblings.power(peer(0.9, 1980e6, 700), others, False).bad is True
    assert siblings.power(peer(0.9, 1980e6, 560), others, False).bad is False


def test_subsystems_place_causes_and_a_view_reports_them() -> None:
    assert subsystems.subsystem_of("xid:79") == "pcie"
    assert subsystems.subsystem_of("xid:74") == "nvlink"
    assert subsystems.subsystem_of("xid:13") == "driver"
    assert subsystems.subsystem_of("row_remap_pending") == "memory"
    assert subsystems.subsystem_of(subsystems.gray_cause("thermal", "thermal_margin")) == \
        "thermal"
    identity = DeviceIdentity("GPU-a", 0, "nvidia", "H100", "00:18")
    held = subsystems.held((("gray:pcie:pcie_link_width", HealthState.DEGRADED, "x8 of x16"),
                            ("xid:79", HealthState.FAILED, "XID 79")))
    lost = DeviceSnapshot(DeviceIdentity("GPU-b", 1, "nvidia", "H100", "00:19"),
                          HealthState.FAILED, 0, reason="lost: GPU_IS_LOST")
    store = SnapshotStore()
    store.put(DeviceSnapshot(identity, HealthState.OK, 0))
    store.put(lost)
    board = HealthBoard(store)  # what the engine and the sampler tell it, as they would
    board.engine_view("GPU-a", EngineView(HealthState.FAILED, held))
    board.reachability("GPU-b", HealthState.FAILED, "lost: GPU_IS_LOST")
    view = health_view(store.current(1))
    first, second = view["devices"]
    assert first["state"] == "failed"
    assert first["subsystems"]["pcie"] == {"state": "failed", "reasons": ["XID 79", "x8 of x16"]}
    assert first["subsystems"]["nvlink"] == {"state": "ok", "reasons": []}
    assert second["subsystems"]["driver"] == {"state": "failed",
                                              "reasons": ["lost: GPU_IS_LOST"]}
    assert HeldCondition("pcie", HealthState.FAILED, "XID 79") in held
