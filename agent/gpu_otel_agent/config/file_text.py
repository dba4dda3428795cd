"""A configuration file's text, read so that no file can hang, flood or crash the agent.

The agent re-reads its file on every change (``runtime/config_watch``) and on SIGHUP, as root,
from a path an operator (or a ConfigMap) controls. What was found (issue 39): a FIFO at the
path blocked the read, on the event loop, for good (no metrics, no events, SIGTERM ignored);
one byte that is not UTF-8 raised ``UnicodeDecodeError`` out of the reload, which ended the
file watch (and at start printed a traceback). So:

- the file is opened ``O_NONBLOCK`` and refused unless ``fstat`` says it is a regular file (a
  FIFO, a device, a socket never reach ``read``);
- at most ``MAX_BYTES`` are read (a configuration is a few kilobytes);
- the bytes must be UTF-8 (YAML 1.2's encodings include UTF-16, but PyYAML reads a ``str``,
  and a file saved as UTF-16 by an editor is a mistake to name, not to guess around); a
  UTF-8 byte-order mark is accepted;
- every refusal is a :class:`FileRefused` whose text is one line, the file first (as YAML
  errors name it: ``FILE:LINE: ...``), then what to do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_BYTES = 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"


class FileRefused(Exception):
    """The file cannot be used; the message is one line."""


def read_text(path: Path, what: str = "configuration file") -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise FileRefused(f"{path}: cannot read {what}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise FileRefused(f"{path}: the {what} is not a regular file ({kind}): not read; "
                              "point the path at a regular file")
        if info.st_size > MAX_BYTES:
            raise FileRefused(f"{path}: the {what} is {info.st_size} bytes, more than the "
                              f"{MAX_BYTES} read: not read")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise FileRefused(f"{path}: cannot read {what}: {error.strerror or error}") from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:  # it grew while read
        raise FileRefused(f"{path}: the {what} is more than {MAX_BYTES} bytes: not read")
    return decode(path, b"".join(chunks), what)


def decode(path: Path, data: bytes, what: str = "configuration file") -> str:
    if data.startswith(_UTF16_BOMS) or (b"\x00" in data[:64] and len(data) >= 2):
        raise FileRefused(f"{path}: the {what} is UTF-16 (or has NUL bytes), not UTF-8: "
                          "save it as UTF-8")
    try:
        return data.removeprefix(_UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        byte = data[error.start]
        raise FileRefused(f"{path}:{line}: the {what} is not UTF-8 (byte 0x{byte:02x} at "
                          f"offset {error.start}): save it as UTF-8") from None
