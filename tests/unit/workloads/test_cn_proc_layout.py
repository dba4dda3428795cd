"""The proc connector layouts in ``cn_proc`` against the kernel's own uapi headers.

An independent reference: a C compiler evaluates each expression of ``C_LAYOUT`` with the
installed ``linux/cn_proc.h`` and ``linux/connector.h`` (linux-libc-dev) and we compare.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpu_otel_agent.workloads import cn_proc, pid_filter

HEADERS = ("linux/netlink.h", "linux/connector.h", "linux/cn_proc.h")
INCLUDE = Path("/usr/include")


def _compiler() -> str:
    for name in ("cc", "clang", "gcc"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no C compiler to evaluate the kernel headers")


def _evaluate(expressions: list[str], tmp_path: Path,
              headers: tuple[str, ...] = HEADERS) -> dict[str, int]:
    """Each C expression's value, as compiled against the kernel headers."""
    lines = [f"#include <{h}>" for h in ("stddef.h", "stdio.h", *headers)]
    lines.append("int main(void) {")
    lines += [f'    printf("%llu\\n", (unsigned long long)({e}));' for e in expressions]
    lines.append("    return 0;\n}")
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    binary = tmp_path / "layout"
    subprocess.run([_compiler(), "-o", str(binary), str(source)], check=True,
                   capture_output=True, text=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return dict(zip(expressions, map(int, out.split()), strict=True))


def test_layouts_match_the_kernel_headers(tmp_path: Path) -> None:
    if not all((INCLUDE / h).exists() for h in HEADERS):
        pytest.skip("kernel uapi headers (linux-libc-dev) are not installed")
    expected = dict(cn_proc.C_LAYOUT)
    # struct proc_input is in headers from 6.6 on; with older headers its layout is exercised
    # by the real kernel instead (test_event_sources: a filtering kernel sends no forks).
    if "struct proc_input" in (INCLUDE / "linux/cn_proc.h").read_text():
        expected |= cn_proc.C_LAYOUT_SINCE_6_6
    assert _evaluate(list(expected), tmp_path) == expected


def test_control_message_is_what_the_kernel_parses() -> None:
    message = cn_proc.control_message(cn_proc.PROC_CN_MCAST_LISTEN, 1234)
    # nlmsghdr (16) + cn_msg (20) + a 4-byte operation; nlmsg_len covers all of it.
    assert len(message) == 40
    assert cn_proc.NLMSGHDR.unpack_from(message) == (40, cn_proc.NLMSG_DONE, 0, 0, 1234)
    assert cn_proc.CN_MSG.unpack_from(message, 16) == (1, 1, 0, 0, 4, 0)
    filtered = cn_proc.control_message(cn_proc.PROC_CN_MCAST_LISTEN, 1, event_mask=0x80000002)
    assert len(filtered) == 44
    assert cn_proc.PROC_INPUT.unpack_from(filtered, 36) == (1, 0x80000002)


def test_socket_filter_constants_match_the_kernel_headers(tmp_path: Path) -> None:
    headers = ("linux/filter.h", "sys/socket.h")
    if not (INCLUDE / "linux/filter.h").exists():
        pytest.skip("kernel uapi headers (linux-libc-dev) are not installed")
    assert _evaluate(list(pid_filter.C_CONSTANTS), tmp_path, headers) == pid_filter.C_CONSTANTS
