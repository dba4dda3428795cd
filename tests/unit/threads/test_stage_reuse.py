"""A ``Stage`` kept and entered once per job (a device thread's) charges as a new one each
time: what an inner stage took in one use is not taken off the next."""

from __future__ import annotations

import time

from gpu_otel_agent.threads import costs


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_kept_stage_charges_each_use_as_a_new_stage_would() -> None:
    kept = costs.Stage(costs.SAMPLING)
    for inner_s in (0.04, 0.0, 0.0):  # an inner stage in the first use only
        before = costs.spent()
        with kept:
            _spin(0.02)
            if inner_s:
                with costs.Stage(costs.ATTRIBUTION):
                    _spin(inner_s)
        after = costs.spent()
        sampling = after[costs.SAMPLING] - before[costs.SAMPLING]
        attribution = after[costs.ATTRIBUTION] - before[costs.ATTRIBUTION]
        # Its own CPU, never less: the first use's inner stage is not taken off again.
        assert sampling >= 0.02
        assert attribution >= inner_s
        if inner_s:  # the inner stage's CPU is charged there, not here as well
            assert sampling < 0.02 + inner_s
