"""The agent's threads carry their names to the kernel (``/proc/self/task/TID/comm``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpu_otel_agent.threads.named import NamedThread, name_pool_thread


def _comm() -> str:
    return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()


def _comm_of(name: str) -> str:
    seen: list[str] = []
    thread = NamedThread(target=lambda: seen.append(_comm()), name=name)
    thread.start()
    thread.join()
    return seen[0]


def test_named_thread_is_named_in_the_kernel() -> None:
    assert _comm_of("nvml-events-12") == "nvml-events-12"


def test_long_names_are_cut_to_the_kernel_limit() -> None:
    assert _comm_of("a-very-long-thread-name") == "a-very-long-thr"  # TASK_COMM_LEN 16


def test_pool_threads_take_their_python_name() -> None:
    with ThreadPoolExecutor(1, thread_name_prefix="otlp-export",
                            initializer=name_pool_thread) as pool:
        assert pool.submit(_comm).result() == "otlp-export_0"
