"""A command in a real pseudo-terminal, its screen read by a terminal emulator (pyte).

The command runs in a session of its own with the pseudo-terminal as its controlling terminal
(``setsid --ctty``), so a resize reaches it the way it does from a terminal window: the kernel
sends SIGWINCH after the window size changes. The emulator answers the queries a terminal
answers (device attributes), as a real one would.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Mapping, Sequence

import pyte


class Terminal:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], rows: int = 24,
                 columns: int = 80) -> None:
        setsid = shutil.which("setsid")
        assert setsid is not None, "setsid (util-linux) is part of every test image"
        self.screen = pyte.Screen(columns, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._master, slave = os.openpty()
        self._size(rows, columns)
        self.screen.write_process_input = self._answer  # what a terminal answers, it sends
        self.process = subprocess.Popen([setsid, "--ctty", *argv], stdin=slave, stdout=slave,
                                        stderr=slave, env={**env, "TERM": "xterm-256color"},
                                        close_fds=True)
        os.close(slave)

    def _answer(self, data: str) -> None:
        os.write(self._master, data.encode())

    def _size(self, rows: int, columns: int) -> None:
        fcntl.ioctl(self._master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def pump(self, seconds: float) -> None:
        """Feed what the command wrote for ``seconds`` to the emulator."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self._master], [], [], min(left, 0.1))
            if ready:
                try:
                    self._stream.feed(os.read(self._master, 65536))
                except OSError:  # the command exited and the terminal closed
                    time.sleep(min(left, 0.1))

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, condition: Callable[[str], bool], what: str,
                 timeout: float = 60.0) -> str:
        """The screen once ``condition`` holds for it; fails with the screen otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.2)
            screen = self.text()
            if condition(screen):
                return screen
            if self.process.poll() is not None:
                self.pump(0.2)
                break
        raise AssertionError(f"{what}: not on the screen within {timeout}s "
                             f"(exit {self.process.poll()}):\n{self.text()}")

    def type(self, keys: bytes) -> None:
        os.write(self._master, keys)

    def resize(self, rows: int, columns: int) -> None:
        self.screen.resize(rows, columns)
        self._size(rows, columns)  # the kernel signals the foreground process group

    def wait_exit(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self.pump(0.1)
        code = self.process.poll()
        assert code is not None, f"still running {timeout}s later:\n{self.text()}"
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self._master)
