"""The endpoint's ``Date`` header equals ``email.utils.formatdate(usegmt=True)`` (the reference),
over random times across centuries, every second boundary's last microseconds, and now."""

from __future__ import annotations

import email.utils
import random

from gpu_otel_agent.http_server.http_date import http_date


def test_random_times() -> None:
    rng = random.Random(41)
    for _ in range(20_000):
        timeval = rng.uniform(0, 4_102_444_800)  # 1970 .. 2100
        assert http_date(timeval) == email.utils.formatdate(timeval, usegmt=True), timeval


def test_second_boundaries_and_rounding() -> None:
    rng = random.Random(7)
    for _ in range(2_000):
        second = rng.randint(0, 4_102_444_800)
        for fraction in (0.0, 0.4999995, 0.5, 0.9999994, 0.9999995, 0.9999996, 0.99999999):
            timeval = second + fraction
            assert http_date(timeval) == email.utils.formatdate(timeval, usegmt=True), timeval


def test_now() -> None:
    before = email.utils.formatdate(usegmt=True)
    now = http_date()
    after = email.utils.formatdate(usegmt=True)
    assert now in (before, after)
    assert now.endswith(" GMT") and len(now) == 29
