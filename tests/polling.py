"""Waiting in tests for something to happen: eventually, within a generous deadline.

CI runs on two loaded cores, so a test never sleeps a fixed time and then looks; it polls
until the condition holds and fails (with ``what``) only when a deadline far beyond any
normal wait has passed. How fast things happen is the benchmark suite's business.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEADLINE_S = 30.0
_POLL_S = 0.01


def wait_until(condition: Callable[[], bool], timeout: float = DEADLINE_S,
               what: str = "condition not reached") -> None:
    """Block until ``condition()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(_POLL_S)


async def until(condition: Callable[[], bool], timeout: float = DEADLINE_S,
                what: str = "condition not reached") -> None:
    """Wait on the running loop until ``condition()`` is true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(_POLL_S)
