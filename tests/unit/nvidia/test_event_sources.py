"""Parsing the kernel log's NVRM Xid lines and mapping them to GPUs."""

from __future__ import annotations

import logging
import threading

import pytest

from gpu_otel_agent.plugins.nvidia.kmsg import KmsgXidReader, parse_line, pci_key

GPUS = {(0, 0x3B, 0): "GPU-a", (1, 0x86, 0): "GPU-b"}


def test_pci_ids_as_nvml_and_the_kernel_write_them() -> None:
    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00") == (0, 0x3B, 0)
    assert pci_key("00000001:86:00.0") == (1, 0x86, 0)


def test_kmsg_record_maps_pci_id_to_the_gpu() -> None:
    event = parse_line("3,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1917, "
                       "GPU has fallen off the bus.\n SUBSYSTEM=pci\n", GPUS)
    assert event is not None
    assert (event.uuid, event.code, event.source) == ("GPU-a", 79, "kmsg")
    assert event.detail == "pid=1917, GPU has fallen off the bus."


def test_kmsg_formats_with_domain_function_or_neither() -> None:
    for line in ("NVRM: Xid (PCI:0001:86:00.0): 48, pid=12, DBE",
                 "NVRM: Xid (PCI:0001:86:00): 48, pid=12, DBE"):
        event = parse_line(line, GPUS)
        assert event is not None and (event.uuid, event.code) == ("GPU-b", 48)
    bare = parse_line("NVRM: Xid (PCI:3b:00): 13, Graphics Exception", GPUS)
    assert bare is not None and bare.uuid == "GPU-a"


def test_other_lines_and_other_gpus_are_ignored() -> None:
    assert parse_line("6,1,2,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module", GPUS) is None
    assert parse_line("NVRM: Xid (PCI:0000:99:00): 79, other GPU", GPUS) is None
    assert pci_key("not a bus id") is None


def test_without_access_to_the_kernel_log_one_clear_line_and_no_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = KmsgXidReader({"00000000:3B:00.0": "GPU-a"}, path="/nonexistent/kmsg")
    threads = threading.active_count()
    with caplog.at_level(logging.WARNING):
        reader.start(lambda batch: None)
    assert threading.active_count() == threads
    (record,) = caplog.records
    assert "cannot read /nonexistent/kmsg" in record.getMessage()
    assert "NVML events only" in record.getMessage()


# NVLink 5 XID lines as drivers print them (leptonai/gpud PRs 1160 and 1174, 2025-12).
NVLINK_LINES = {
    "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 "
    "0x00100000 0x00000004)": (145, False, 13, "RLW_RXPIPE", 0, 8),
    "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 "
    "0x00000000 0x00000000)": (149, True, 0, "NETIR_LINK_EVT", 38, 0),
    "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 "
    "0x00000000)": (149, True, None, "NETIR", 0, 0),
    "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 "
    "0x00000000)": (144, False, 0, "SAW_MVB", 0, 8),
}


def test_nvlink_xid_lines_give_severity_link_unit_subcode_and_status() -> None:
    for detail, (code, fatal, link, unit, subcode, status) in NVLINK_LINES.items():
        event = parse_line(f"3,9,9,-;NVRM: Xid (PCI:0000:3b:00): {code}, {detail}", GPUS)
        assert event is not None and event.link_fault is not None, detail
        fault = event.link_fault
        assert (event.code, fault.fatal, fault.link, fault.unit, fault.subcode,
                fault.status) == (code, fatal, link, unit, subcode, status), detail


def test_other_xids_and_unusual_nvlink_lines_carry_no_link_fault() -> None:
    plain = parse_line("NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=python3, Ch 00000010", GPUS)
    assert plain is not None and plain.link_fault is None
    # An NVLink XID whose detail is not in the NVLink 5 form: reported, severity from the catalog
    odd = parse_line("NVRM: Xid (PCI:0000:3b:00): 145, something else entirely", GPUS)
    assert odd is not None and odd.code == 145 and odd.link_fault is None
    # 137 names a link in prose (NVIDIA/nccl issue 2241): not one of 144-150, not decoded
    priv = parse_line("NVRM: Xid (PCI:0000:3b:00): 137, RLW_RXPIPE interrupt hit on link 11 "
                      "on GPU0: PRIV Error", GPUS)
    assert priv is not None and priv.link_fault is None


def test_an_nvswitch_sxid_is_an_event_of_the_switch_and_its_other_lines_are_not() -> None:
    pci = "PCI:0000:04:00.0"
    event = parse_line(f"4,7,7,-;nvidia-nvswitch3: SXid ({pci}): 22013, Non-fatal, Link 44 "
                       "Minion Link DLREQ interrupt", GPUS)
    assert event is not None and event.kind == "sxid"
    assert (event.uuid, event.name, event.code, event.detail) == (
        "0000:04:00.0", "nvidia-nvswitch3", 22013, "Minion Link DLREQ interrupt")
    assert event.link_fault is not None
    assert (event.link_fault.fatal, event.link_fault.link) == (False, 44)
    fatal = parse_line(f"nvidia-nvswitch0: SXid ({pci}): 12028, Fatal, Link 46 egress "
                       "non-posted PRIV error", GPUS)
    assert fatal is not None and fatal.link_fault is not None and fatal.link_fault.fatal
    for other in (f"nvidia-nvswitch3: SXid ({pci}): 22013, Data {{0x0000002b, 0x0000002b}}",
                  f"nvidia-nvswitch3: SXid ({pci}): 22013, Severity 0 Engine instance 44 "
                  "Sub-engine instance 00"):
        assert parse_line(other, GPUS) is None
