"""Reading captures of real machines: both forms of nvidia-smi -q, what "not available" means, the
MIG layout, and how captures join a scenario. The corpus files themselves are the inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.nvidia.capture import fields, writer
from gpu_otel_agent.simulation.captures.nvidia_smi.convert import cuda_version, number
from gpu_otel_agent.simulation.captures.nvidia_smi.formats import NVIDIA_SMI_TEXT, NVIDIA_SMI_XML
from gpu_otel_agent.simulation.captures.registry import (
    CaptureError,
    CaptureFormat,
    capture_formats,
    read_capture,
)
from gpu_otel_agent.simulation.node.scenario import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "examples" / "captures" / "nvidia"
A100_MIG = CORPUS / "a100-sxm4-80gb-mig-1g20gb-x4.q.xml"
H100_TEXT = CORPUS / "h100-sxm-x8-535.161.08.q.txt"
T4 = CORPUS / "tesla-t4-processes.q.xml"


def test_every_field_has_a_description_and_an_nvml_call() -> None:
    for f in fields.FIELDS:
        assert f.description.strip(), f.key
        assert f.nvml.strip(), f.key
        assert f.xml and f.text, f.key
    for row in fields.STRUCTURES:
        assert all(part.strip() for part in row), row


def test_the_writer_reads_every_field_it_writes() -> None:
    assert {f.key for f in fields.FIELDS if f.writer} <= set(writer.READERS)
    for f in fields.FIELDS:
        path = writer.xml_path(f)
        assert "+" not in path and not path.startswith("@")


def test_formats_are_registered_and_claim_only_their_own() -> None:
    formats = capture_formats()
    assert {f.name for f in formats} == {"nvidia-smi-xml", "nvidia-smi-text",
                                         "nvidia-smi-table", "amd-smi-json"}
    assert all(isinstance(f, CaptureFormat) for f in formats)
    assert NVIDIA_SMI_XML.sniff(A100_MIG.read_text()[:4096])
    assert not NVIDIA_SMI_TEXT.sniff(A100_MIG.read_text()[:4096])
    assert NVIDIA_SMI_TEXT.sniff(H100_TEXT.read_text()[:4096])
    for path in (*CORPUS.iterdir(), *(CORPUS.parent / "amd").glob("*.json")):
        head = path.read_text(encoding="utf-8")[:4096]
        assert sum(f.sniff(head) for f in formats) <= 1, path  # never claimed twice


def test_the_index_lists_every_corpus_file_with_its_source() -> None:
    index = (REPO / "examples" / "captures" / "INDEX.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `nvidia/([^`]+)` \|", index, re.M))
    assert listed == {p.name for p in CORPUS.iterdir()}
    for line in index.splitlines():
        if line.startswith("| `nvidia/"):
            assert "https://github.com/" in line, line
    assert len(listed) >= 20


def test_text_form_reads_a_real_h100_as_printed() -> None:
    fragment = read_capture(H100_TEXT)
    assert fragment.format == "nvidia-smi-text"
    assert fragment.system == {"driver_version": "535.161.08", "cuda_driver_version": 12020}
    assert len(fragment.devices) == 8
    second = fragment.devices[1]
    assert second["uuid"] == "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00"
    assert second["pci_bus_id"] == "00000000:3B:00.0"
    assert second["serial"] == "1650124008135"
    assert second["vbios"] == "96.00.74.00.0D"
    assert second["minor_number"] == 1.0
    assert second["memory_total_mib"] == 81559.0
    assert second["memory_reserved_mib"] == 551.0
    assert second["power_w"] == 69.52
    assert second["power_limit_w"] == 700.0  # "Current Power Limit" in the v12+ layout
    assert second["pcie_replay_counter"] == 63.0
    assert second["fan_percent"] is None  # N/A: served as NOT_SUPPORTED
    assert second["retired_pages_sbe"] is None  # a whole section printed N/A
    # HW Slowdown (0x8) and HW Power Brake Slowdown (0x80, printed nested under it) active
    assert second["clocks_event_reasons"] == 0x88


def test_xml_form_reads_a_real_mig_a100() -> None:
    fragment = read_capture(A100_MIG)
    device = fragment.devices[0]
    assert device["model"] == "NVIDIA A100-SXM4-80GB"
    assert device["utilization_gpu"] is None  # N/A on a MIG-enabled GPU
    assert device["remapped_rows_pending"] is None  # <remapped_rows>N/A</remapped_rows>
    assert device["power_limit_w"] == 500.0
    mig = device["mig"]
    assert isinstance(mig, list)
    assert [m["gpu_instance_id"] for m in mig] == [3, 4, 5, 6]
    assert {m["profile"] for m in mig} == {"1g.20gb"}  # 14 SMs, 19968 MiB of 81920
    assert {m["memory_total_mib"] for m in mig} == {19968.0}
    assert [m["mig_index"] for m in mig] == [0, 1, 2, 3]


def test_processes_keep_pid_type_and_memory_but_not_the_name() -> None:
    fragment = read_capture(T4)
    assert [(p["pid"], p["type"], p["used_memory_mib"]) for p in fragment.processes] == [
        (675, "graphics", 22.0), (5762, "compute", 1005.0)]
    names = {n.value for n in fragment.not_served if n.field.endswith("process_name")}
    assert names == {"/usr/lib/xorg/Xorg", "python"}


@pytest.mark.parametrize(("printed", "kind", "value"), [
    ("81559 MiB", "number", 81559.0), ("69.52 W", "number", 69.52), ("16x", "link_width", 16.0),
    ("P0", "pstate", 0.0), ("Unknown", "pstate", 32.0), ("Enabled", "flag", 1.0),
    ("Not Active", "flag", 0.0), ("Yes", "flag", 1.0), ("Exclusive_Process", "compute_mode", 3.0),
    ("N/A", "number", None), ("[N/A]", "number", None), ("[Not Supported]", "number", None),
    ("Requested functionality has been deprecated", "flag", None),
    ("[Unknown Error]", "number", None),
])
def test_printed_values(printed: str, kind: str, value: float | None) -> None:
    assert number(printed, kind) == value


def test_cuda_version() -> None:
    assert cuda_version("12.2") == 12020
    assert cuda_version("11.4") == 11040


def test_a_malformed_capture_is_refused_naming_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text('<?xml version="1.0" ?>\n<nvidia_smi_log><gpu id="0"><product_name>',
                      encoding="utf-8")
    with pytest.raises(CaptureError, match=r"broken\.xml"):
        read_capture(broken)
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n", encoding="utf-8")
    with pytest.raises(CaptureError, match=r"notes\.txt: not a capture format"):
        read_capture(unknown)
    bad_value = tmp_path / "bad.xml"
    bad_value.write_text(A100_MIG.read_text().replace(
        "<current_ecc>Enabled</current_ecc>", "<current_ecc>Sometimes</current_ecc>"))
    fragment = read_capture(bad_value)  # one bad value is listed, the rest is served
    assert any(n.field == "ecc_mode" and n.value == "Sometimes" for n in fragment.not_served)


def test_captures_lead_the_devices_and_the_file_may_add_its_own(tmp_path: Path) -> None:
    scenario_path = tmp_path / "s.yaml"
    text = (f"capture: [{T4}, {H100_TEXT}]\n"
            "devices: [{model: NVIDIA H100 80GB HBM3}]\n"
            "processes: [{device: 9, pid: 4242, used_memory_mib: 10}]\n"
            "timeline: [{at: 1s, device: 1, xid: 79}]\n")
    scenario = parse_scenario(text, scenario_path)
    assert len(scenario.devices) == 10
    assert scenario.devices[0].model == "Tesla T4"
    assert scenario.devices[1].uuid == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert scenario.devices[9].uuid is None  # the file's own device comes last
    assert scenario.devices[1].vbios == "96.00.74.00.0D"
    # the first capture's driver (the T4's), the file's processes and timeline by combined index
    assert scenario.driver_version == "515.105.01"
    assert [p.device for p in scenario.processes] == [0, 0, 9]
    assert scenario.timeline[0].device == 1
    assert [f.source.name for f in scenario.captures] == [T4.name, H100_TEXT.name]


def test_the_file_s_driver_version_wins(tmp_path: Path) -> None:
    scenario = parse_scenario(f"driver_version: '580.95.05'\ncapture: {T4}\n", tmp_path / "s")
    assert scenario.driver_version == "580.95.05"


def test_a_missing_capture_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read capture"):
        parse_scenario("capture: nowhere.xml\n", tmp_path / "s.yaml")


def test_a_captured_mig_layout_reaches_the_scenario(tmp_path: Path) -> None:
    """The A100's GPU instance ids (3..6, not 1..4), MIG device indices and memory as printed
    (19968 MiB, below the profile's 20480) become the scenario's MIG layout keys."""
    scenario = parse_scenario(f"capture: {A100_MIG}\n", tmp_path / "s.yaml")
    mig = scenario.devices[0].mig
    assert mig is not None
    assert [m.profile for m in mig] == ["1g.20gb"] * 4
    assert [m.gpu_instance_id for m in mig] == [3, 4, 5, 6]
    assert [m.compute_instances[0].mig_index for m in mig] == [0, 1, 2, 3]
    assert {m.memory_total_mib for m in mig} == {19968.0}
    listed = {n.field for f in scenario.captures for n in f.not_served}
    assert not any(field.startswith("mig[") for field in listed)


def test_several_compute_instances_of_one_gpu_instance(tmp_path: Path) -> None:
    """No public capture shows two compute instances in one GPU instance; this one is the real
    A100 capture with a second MIG device added to its first GPU instance, as nvidia-smi prints
    a 2g.20gb instance (28 SMs, 19968 MiB) holding two 1c compute instances of 14 SMs each: the
    same gpu_instance_id, compute instances 0 and 1."""
    text = A100_MIG.read_text(encoding="utf-8")
    first = text.index("<mig_device>")
    end = text.index("</mig_device>", first) + len("</mig_device>")
    device = text[first:end]
    half = device
    second = half.replace("<compute_instance_id>0<", "<compute_instance_id>1<").replace(
        "<index>0</index>", "<index>4</index>")
    split = tmp_path / "split.xml"
    split.write_text(text[:first] + half + second + text[end:], encoding="utf-8")
    mig = read_capture(split).devices[0]["mig"]
    assert isinstance(mig, list)
    assert mig[0]["gpu_instance_id"] == 3
    assert mig[0]["compute_instances"] == [
        {"compute_instance_id": 0, "profile": "1c.2g.20gb", "mig_index": 0},
        {"compute_instance_id": 1, "profile": "1c.2g.20gb", "mig_index": 4}]
    assert mig[0]["profile"] == "2g.20gb"
    assert "mig_index" not in mig[0]  # given per compute instance
    assert mig[1] == {"profile": "1g.20gb", "gpu_instance_id": 4, "memory_used_mib": 12.0,
                      "memory_total_mib": 19968.0, "mig_index": 1}


def test_architecture_and_pci_ids_are_read_in_both_forms_and_served_as_printed(
        tmp_path: Path) -> None:
    text = read_capture(H100_TEXT).devices[0]
    assert (text["architecture"], text["pci_device_id"], text["pci_subsystem_id"]) == (
        "Hopper", "0x233010DE", "0x16C110DE")
    xml = read_capture(A100_MIG).devices[0]
    assert (xml["architecture"], xml["pci_device_id"]) == ("Ampere", "20B210DE")  # XML: no 0x
    # As the node serves them: nvml.h's numbers.
    scenario = parse_scenario(f"capture: {A100_MIG}\n", tmp_path / "s")
    readings = scenario.devices[0].readings
    assert (readings["architecture"], readings["pci_device_id"]) == (7, 0x20B210DE)


def test_an_architecture_nvml_h_does_not_name_is_listed_not_served(tmp_path: Path) -> None:
    text = H100_TEXT.read_text(encoding="utf-8").replace(
        "Product Architecture                  : Hopper",
        "Product Architecture                  : Vera", 1)
    capture = tmp_path / "vera.q.txt"
    capture.write_text(text, encoding="utf-8")
    fragment = read_capture(capture)
    assert "architecture" not in fragment.devices[0]
    assert fragment.devices[1]["architecture"] == "Hopper"  # only the first GPU was changed
    (entry,) = [n for n in fragment.not_served if n.field == "architecture"]
    assert entry.device == 0 and entry.value.strip() == "Vera"
    assert "NVML_DEVICE_ARCH_UNKNOWN" in entry.reason
