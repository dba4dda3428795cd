"""Runs a command and reports its rusage: ``python -I -S spawn_child.py COMMAND...``.

Why a helper: Linux keeps a process's ru_maxrss across exec, and a child forked from the
benchmark (by then ~190 MiB with the receivers' data) starts with the parent's resident size,
so wait4 from the benchmark would report *our* size for a small tool like gpustat. This helper
is a fresh interpreter without site packages (a few MiB), so the child forked from it starts
small and its peak is its own. The command's stdout passes through; the rusage is the last line
on stderr, as JSON.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    command = sys.argv[1:]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)  # the tool's own messages would mix with our JSON line
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    report = {
        "returncode": os.waitstatus_to_exitcode(status),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_kib": usage.ru_maxrss,
    }
    sys.stdout.flush()
    print(json.dumps(report), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
