"""The kernel log as a second XID source: ``NVRM: Xid (PCI:0000:3b:00): 79, ...`` lines.

Some XIDs (79 "fallen off the bus", 119, 120) never arrive through NVML, and NVML's own event
path dies with the GPU; the driver still writes them to the kernel log. The reader starts at
the end of ``/dev/kmsg`` (what happened before the agent started is not news), maps the PCI
bus id in the line to the GPU, and hands each XID over; the engine drops the second sighting
of a fault NVML reported too. Without access to ``/dev/kmsg`` it says so once and stops.

What the line says beyond the code is kept where it matters. The NVLink 5 XIDs 144-150 carry
the unit, ``Fatal`` or ``Nonfatal``, the link and the registers, as drivers write them (real
lines: ``145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 ...)``, leptonai/gpud
PR 1174; ``149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 ...)``, PR 1160). NVSwitch
SXIDs (``nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link
DLREQ interrupt``, NVIDIA/nvtrust issue 124, driver 570.195.03) are events of the switch: the
line that says Fatal or Non-fatal is the event; the ``Data {...}`` and ``Severity N Engine
instance`` lines the driver writes around it add nothing an operator reads.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import select
import threading
import time
from collections.abc import Mapping

from gpu_otel_agent.backends.protocol import (
    EVENT_SXID,
    EVENT_XID,
    DeviceEvent,
    EventBatch,
    LinkFault,
)
from gpu_otel_agent.model.pci import PciKey, pci_key
from gpu_otel_agent.threads.supervised import SupervisedThread

log = logging.getLogger(__name__)
KMSG = "/dev/kmsg"
_XID = re.compile(
    r"NVRM: Xid \(PCI:(?:([0-9A-Fa-f]+):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})"
    r"(?:\.([0-7]))?\): (\d+)(?:,\s*(.*))?"
)

# The driver prints the XID as a 32-bit number; anything longer is not one of its lines (a
# crafted line's 2^63 has no encoding on the wire either). Digits are counted before int()
# converts them: a line of thousands of digits costs nothing.
XID_CODE_MAX = 2**32 - 1
_CODE_DIGITS = len(str(XID_CODE_MAX))
_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said and len(_said) < 100:
        _said.add(message)
        log.warning("%s", message)


# The NVLink 5 XIDs' detail: unit, severity word, XC/instance, the link, then the registers.
_NVLINK_XIDS = range(144, 151)
_NVLINK_DETAIL = re.compile(
    r"^(?P<unit>[A-Z0-9_]+)\s+(?P<severity>Fatal|Nonfatal|Non-fatal)\b.*?"
    r"\bLink\s+(?P<link>-?\d{1,4})\b(?:\s*\((?P<regs>[^)]{0,200})\))?", re.IGNORECASE)
_SXID = re.compile(
    r"(?P<device>nvidia-nvswitch\d+): SXid \(PCI:(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.[0-7])\): (?P<code>\d{1,10}), (?P<severity>Fatal|Non-fatal|Nonfatal)\b"
    r"(?:,\s*Link\s+(?P<link>-?\d{1,4})\b)?(?P<rest>.*)", re.IGNORECASE)


def _message(line: str) -> str:
    return line.split(";", 1)[1] if ";" in line.split("\n", 1)[0] else line


def _link(raw: str | None) -> int | None:
    return int(raw) if raw is not None and int(raw) >= 0 else None  # "Link -1": no link


def nvlink_fault(detail: str) -> LinkFault | None:
    """The NVLink 5 detail of an XID 144-150 line; None when the line is not in that form."""
    match = _NVLINK_DETAIL.match(detail)
    if match is None:
        return None
    registers = [int(r, 16) for r in re.findall(r"0x([0-9A-Fa-f]{1,8})\b", match["regs"] or "")]
    return LinkFault(fatal=match["severity"].lower() == "fatal", link=_link(match["link"]),
                     unit=match["unit"],
                     subcode=(registers[0] >> 20) & 0x3F if registers else None,
                     status=registers[1] if len(registers) > 1 else None)


def parse_line(line: str, gpus: Mapping[PciKey, str]) -> DeviceEvent | None:
    """One kmsg record (``prio,seq,ts,flags;message``) -> an XID event of a known GPU, or an
    NVSwitch's SXID."""
    message = _message(line)
    match = _XID.search(message)
    if match is None:
        return _sxid(message)
    domain, bus, device, _function, code, detail = match.groups()
    key = (int(domain or "0", 16), int(bus, 16), int(device, 16))
    uuid = gpus.get(key)
    if uuid is None:
        return None
    if len(code) > _CODE_DIGITS or int(code) > XID_CODE_MAX:
        _say_once(f"kernel-log XID code {code[:40]} on {uuid} is beyond 32 bits: not a driver "
                  "XID (the driver prints a 32-bit number); the line is ignored")
        return None
    text = (detail or "").split("\n", 1)[0].strip()
    fault = nvlink_fault(text[:300]) if int(code) in _NVLINK_XIDS else None
    return DeviceEvent(uuid, EVENT_XID, time.time_ns(), code=int(code), source="kmsg",
                       detail=text[:200], link_fault=fault)


def _sxid(message: str) -> DeviceEvent | None:
    match = _SXID.search(message)
    if match is None:
        return None
    rest = match["rest"].split("\n", 1)[0].strip(" ,")
    return DeviceEvent(match["pci"].lower(), EVENT_SXID, time.time_ns(), code=int(match["code"]),
                       source="kmsg", detail=rest[:200], name=match["device"],
                       link_fault=LinkFault(fatal=match["severity"].lower() == "fatal",
                                            link=_link(match["link"])))


class KmsgXidReader:
    name = "kmsg"

    def __init__(self, gpus: Mapping[str, str], path: str = KMSG) -> None:
        """``gpus``: PCI bus id (as NVML gives it) -> GPU UUID."""
        self._gpus = {key: uuid for bus, uuid in gpus.items()
                      if (key := pci_key(bus)) is not None}
        self._path = path
        self._stop_write = -1  # stop() closes it: the reader's poll() wakes with POLLHUP
        self._stopping = threading.Event()

    def start(self, emit: EventBatch) -> None:
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(fd, 0, os.SEEK_END)
        except OSError as error:
            log.warning("cannot read %s (%s): XIDs are taken from NVML events only (79, 119 "
                        "and 120 may be missed); run as root or with CAP_SYSLOG to add the "
                        "kernel log", self._path, error.strerror or error)
            return
        # The reader sleeps in poll() until a record arrives or stop() closes the pipe's
        # write end (a timed poll woke the thread five times a second on a quiet node).
        stop_read, self._stop_write = os.pipe()
        # Supervised: a bug that raises while reading is logged, counted and the reader
        # restarted on the same descriptors (closed only when it stops).
        SupervisedThread(self._run, "kmsg-xid", args=(fd, stop_read, emit),
                         stopping=self._stopping).start()

    def stop(self) -> None:
        self._stopping.set()
        stop_write, self._stop_write = self._stop_write, -1
        if stop_write >= 0:
            os.close(stop_write)

    def _run(self, fd: int, stop_read: int, emit: EventBatch) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(stop_read, select.POLLIN)
        while True:
            if any(ready == stop_read for ready, _ in poller.poll()):
                os.close(fd)
                os.close(stop_read)
                return
            self._read(fd, emit)

    def _read(self, fd: int, emit: EventBatch) -> None:
        """Everything readable now, handed over as one batch."""
        batch = []
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno == errno.EPIPE:
                    continue  # records were overwritten before we read them
                raise
            if not record:
                break
            event = parse_line(record.decode(errors="replace"), self._gpus)
            if event is not None:
                batch.append(event)
        if batch:
            emit(batch)
