"""The configuration file watch: real inotify on a real directory, every way a file changes."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

from gpu_otel_agent.runtime.config_watch import watch_config_file
from tests.polling import until as _until

Change = Callable[[Path], None]


def _edit_in_place(config: Path) -> None:
    config.write_text("log_level: debug\n", encoding="utf-8")


def _rename_over(config: Path) -> None:
    fresh = config.with_name(".agent.yaml.tmp")
    fresh.write_text("log_level: warning\n", encoding="utf-8")
    os.utime(fresh, (1, 1))
    fresh.replace(config)


def _configmap_swap(config: Path) -> None:
    """What the kubelet does: write a new timestamped directory, point ..data at it by a
    rename; the file the agent reads is a symlink through ..data that never changes."""
    directory = config.parent
    new = directory / "..2026_11_25_new"
    new.mkdir()
    (new / "agent.yaml").write_text("log_level: error\n", encoding="utf-8")
    (directory / "..data_tmp").symlink_to(new.name)
    (directory / "..data_tmp").replace(directory / "..data")


def _watching(config: Path, body: Callable[[list[int]], Awaitable[None]]) -> None:
    calls: list[int] = []

    async def main() -> None:
        task = asyncio.create_task(watch_config_file(config, lambda: calls.append(1)))
        await asyncio.sleep(0.1)  # the watch is in place
        try:
            await body(calls)
        finally:
            task.cancel()

    asyncio.run(main())


def test_each_kind_of_change_reloads_once_and_other_files_do_not(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("log_level: info\n", encoding="utf-8")
    os.utime(config, (0, 0))

    async def body(calls: list[int]) -> None:
        (tmp_path / "unrelated.txt").write_text("x", encoding="utf-8")
        await asyncio.sleep(0.3)
        assert calls == []  # looked at the config's mtime: unchanged
        for number, change in enumerate((_edit_in_place, _rename_over), start=1):
            change(config)
            await _until(lambda n=number: len(calls) == n)  # type: ignore[misc]

    _watching(config, body)


def test_a_configmap_update_is_seen_through_its_symlinks(tmp_path: Path) -> None:
    first = tmp_path / "..2026_11_24_old"
    first.mkdir()
    (first / "agent.yaml").write_text("log_level: info\n", encoding="utf-8")
    os.utime(first / "agent.yaml", (0, 0))
    (tmp_path / "..data").symlink_to(first.name)
    config = tmp_path / "agent.yaml"
    config.symlink_to("..data/agent.yaml")

    async def body(calls: list[int]) -> None:
        _configmap_swap(config)
        await _until(lambda: calls == [1])
        shutil.rmtree(first)  # the kubelet removes the old directory: no change of ours
        await asyncio.sleep(0.3)
        assert calls == [1]

    _watching(config, body)
