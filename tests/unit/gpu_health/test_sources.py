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
