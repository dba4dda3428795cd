"""The capture reader across driver generations 570-610: every field read in each generation's
spelling, as real captures print it (the corpus files) or as NVIDIA's nvidia-smi documentation
says a release renamed it (applied to a real capture: its values must read the same).

Each test here failed on the reader written for drivers up to 555 (issue 38).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.nvidia.capture import fields
from gpu_otel_agent.simulation.captures.nvidia_smi import convert, formats, reader, tree
from gpu_otel_agent.simulation.captures.nvidia_smi.convert import number
from gpu_otel_agent.simulation.captures.nvidia_smi.formats import NVIDIA_SMI_TEXT
from gpu_otel_agent.simulation.captures.nvidia_smi.model import SmiCapture
from gpu_otel_agent.simulation.captures.registry import (
    CaptureError,
    not_served_lines,
    read_capture,
)
from gpu_otel_agent.simulation.nvidia import mig_profiles

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "examples" / "captures" / "nvidia"
H100_535 = CORPUS / "h100-sxm-x8-535.161.08.q.txt"
GEFORCE_570_UTIL = CORPUS / "geforce-570-utilization-gpu-label.q.txt"
LAPTOP_590_POWER = CORPUS / "laptop-590.48.01-power.q.txt"
RTX3060_570 = CORPUS / "rtx-3060-570.124.04.q.xml"
RTX3090_590 = CORPUS / "rtx-3090-590.44.01.q.xml"
RTX3080_595_LOAD = CORPUS / "rtx-3080-595.58.03-load.q.xml"
RTX4000_595_TLIMIT = CORPUS / "rtx-4000-sff-ada-595.84-tlimit.q.xml"
H20_MIG = CORPUS / "h20-3e-mig-device.q.txt"
GENERATIONS = [RTX3060_570, RTX3090_590, RTX3080_595_LOAD, RTX4000_595_TLIMIT]


def _text_capture(text: str, name: str = "capture.q.txt") -> SmiCapture:
    return NVIDIA_SMI_TEXT.parse(text, Path(name))


def _lookup_any(node: tree.Node, paths: tuple[str, ...]) -> str | None:
    return next((v for v in (tree.lookup(node, p) for p in paths) if v is not None), None)


def test_570_prints_gpu_utilization_under_gpu_and_the_reader_reads_it() -> None:
    # The real 570 block (munin-monitoring/contrib#1485) has no header: read its tree.
    node = tree.parse_text(GEFORCE_570_UTIL.read_text(encoding="utf-8"))
    assert _lookup_any(node, fields.BY_KEY["utilization_gpu"].text) == "33 %"
    assert _lookup_any(node, fields.BY_KEY["utilization_memory"].text) == "3 %"


def test_a_570_style_label_on_a_real_capture_reads_the_same_utilization() -> None:
    original = H100_535.read_text(encoding="utf-8")
    renamed = re.sub(r"(?m)^(\s+)Gpu(\s+:)", r"\1GPU\2", original)
    assert renamed != original
    before, after = _text_capture(original), _text_capture(renamed)
    assert [g.values["utilization_gpu"] for g in after.gpus] == \
        [g.values["utilization_gpu"] for g in before.gpus]


def test_instantaneous_power_draw_is_read_from_a_real_590_capture() -> None:
    capture = _text_capture(LAPTOP_590_POWER.read_text(encoding="utf-8"))
    values = capture.gpus[0].values
    assert values["power_w"] == "1.44 W"
    assert values["power_average_w"] == "1.44 W"
    assert values["power_limit_w"] == "35.00 W"
    assert values["power_max_limit_w"] == "95.00 W"
    assert capture.driver_version == "590.48.01"
    assert capture.gpus[0].unplaced == ()


def _ceiling_610(text: str) -> str:
    """The 610 text layout NVIDIA's change log describes: the current, requested and default
    limits move into a "GPU Ceiling Power Limit" sub-section of "GPU Power Readings"."""
    out: list[str] = []
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("    ") and not line.startswith("        "):
            section = stripped
        if section == "GPU Power Readings" and re.match(
                r"(Current|Requested|Default) Power Limit\s+:", stripped):
            if not out[-1].strip().startswith(("GPU Ceiling Power Limit", "Current",
                                               "Requested", "Default")):
                out.append("        GPU Ceiling Power Limit")
            out.append("    " + line)
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def test_610_power_limits_under_gpu_ceiling_power_limit_are_read() -> None:
    moved = _ceiling_610(LAPTOP_590_POWER.read_text(encoding="utf-8"))
    assert "        GPU Ceiling Power Limit\n            Current Power Limit" in moved
    values = _text_capture(moved).gpus[0].values
    assert values["power_limit_w"] == "35.00 W"
    assert values["power_default_limit_w"] == "35.00 W"
    assert values["power_min_limit_w"] == "5.00 W"


def test_610_layout_of_a_real_h100_replays_its_limits() -> None:
    original = read_capture(H100_535)
    path = H100_535.with_name("h100-610-layout.q.txt")
    moved = NVIDIA_SMI_TEXT.read(_ceiling_610(H100_535.read_text(encoding="utf-8")), path)
    for before, after in zip(original.devices, moved.devices, strict=True):
        assert after["power_limit_w"] == before["power_limit_w"] == 700.0
        assert after["power_default_limit_w"] == before["power_default_limit_w"]
    assert not [n for n in moved.not_served if n.reason.startswith("met but not placed")]


def test_a_note_after_the_driver_version_stays_out_of_the_served_version() -> None:
    # 610 deprecates "Driver Version" for "KMD Version" (nvidia-smi change log); what the line
    # then carries after the number is not a version (the note's wording is not documented).
    text = H100_535.read_text(encoding="utf-8")
    noted = text.replace("535.161.08\n", "535.161.08 (deprecated: see KMD Version)\n", 1)
    fragment = NVIDIA_SMI_TEXT.read(noted, H100_535)
    assert fragment.system["driver_version"] == "535.161.08"
    assert any(n.field == "driver_version" and n.device is None for n in fragment.not_served)
    kmd = text.replace("Driver Version     ", "KMD Version        ", 1)
    assert NVIDIA_SMI_TEXT.read(kmd, H100_535).system["driver_version"] == "535.161.08"


def test_shared_fb_memory_usage_of_a_mig_device_is_read() -> None:
    text = H20_MIG.read_text(encoding="utf-8")
    shared = text.replace("        FB Memory Usage\n", "        Shared FB Memory Usage\n")
    assert shared != text
    node = tree.parse_text(shared)
    gpu = next(c for c in node.children if c.name.startswith("GPU "))
    (device,) = reader._mig_devices(gpu, xml=False)
    assert (device.memory_total, device.memory_used) == ("71424 MiB", "44 MiB")
    assert device.sm_count == 32


@pytest.mark.parametrize(("model", "memory", "sms", "expected"), [
    ("NVIDIA H100 80GB HBM3", None, 60, "3g.40gb"),  # memory not printed: SMs alone decide
    ("NVIDIA H100 80GB HBM3", 40448.0, 60, "3g.40gb"),
    ("NVIDIA H100 80GB HBM3", 40448.0, 64, "4g.40gb"),
    ("NVIDIA H100 80GB HBM3", None, 132, "7g.80gb"),
    ("NVIDIA A100-SXM4-80GB", 19968.0, 28, "2g.20gb"),
])
def test_a_mig_profile_is_found_by_its_own_sm_count(model: str, memory: float | None,
                                                    sms: int, expected: str) -> None:
    total = 81559.0 if "H100" in model else 81920.0
    profile = convert._profile_for(model, total, memory, sms)
    assert profile is not None and profile.name == expected
    assert mig_profiles.sm_count(profile, model) == sms


def test_h200_sm_counts_are_the_captured_ones() -> None:
    # examples/captures/nvidia/h200-mig-lgip.txt: "MIG <profile> ... <SMs>" per row.
    printed = dict(re.findall(r"MIG (\S+)\s+\d+\s+\d+/\d+\s+[\d.]+\s+\w+\s+(\d+)",
                              (CORPUS / "h200-mig-lgip.txt").read_text(encoding="utf-8")))
    assert printed
    table = mig_profiles.mig_model("NVIDIA H200")
    for name, sms in printed.items():
        if name in table.profiles:
            assert table.profiles[name].sms == int(sms), name


def test_a_geforce_serial_printed_na_is_served_not_supported() -> None:
    fragment = read_capture(RTX3090_590)
    (device,) = fragment.devices
    assert "serial" not in device
    assert "nvmlDeviceGetSerial" in device["unsupported"]  # type: ignore[operator]
    masked = read_capture(RTX3080_595_LOAD).devices[0]
    assert masked["serial"] == "REDACTED"  # printed so by its publisher: served as printed
    assert "nvmlDeviceGetSerial" not in masked.get("unsupported", ())  # type: ignore[operator]


def test_the_display_clock_reason_xml_tag_is_read() -> None:
    for path in GENERATIONS:
        gpu = formats.NVIDIA_SMI_XML.parse(path.read_text(encoding="utf-8"), path).gpus[0]
        assert set(gpu.clock_events) == {r[0] for r in fields.CLOCK_EVENT_REASONS}, path.name


def test_thresholds_relative_to_t_limit_are_served_absolute() -> None:
    gpu = formats.NVIDIA_SMI_XML.parse(RTX4000_595_TLIMIT.read_text(encoding="utf-8"),
                                       RTX4000_595_TLIMIT).gpus[0]
    # 38 C now, 49 C from the maximum operating temperature, slowdown at -2 C from it: 89 C.
    assert gpu.values["temperature_slowdown_c"] == "89 C"
    assert read_capture(RTX4000_595_TLIMIT).devices[0]["temperature_slowdown_c"] == 89.0
    absolute = read_capture(RTX3080_595_LOAD).devices[0]
    assert absolute["temperature_slowdown_c"] == 95.0  # printed absolute: as printed


@pytest.mark.parametrize("path", GENERATIONS, ids=lambda p: p.name)
def test_each_generation_reads_every_printed_field(path: Path) -> None:
    """Field by field: what the capture prints at a row's path is what the node is given."""
    text = path.read_text(encoding="utf-8")
    root = tree.parse_xml(text)
    gpu_node = root.all("gpu")[0]
    (device,) = read_capture(path).devices
    for f in fields.READINGS:
        printed = _lookup_any(gpu_node, f.xml)
        if printed is None:
            continue
        assert device[f.key] == number(printed, f.kind), (f.key, printed)
    assert formats.NVIDIA_SMI_XML.parse(text, path).gpus[0].unplaced == ()


def test_the_595_capture_under_load_replays_its_load() -> None:
    (device,) = read_capture(RTX3080_595_LOAD).devices
    assert device["utilization_gpu"] == 65.0
    assert device["power_w"] == 142.33
    assert device["memory_used_mib"] == 9184.0


def test_a_field_the_reader_cannot_place_is_reported_not_dropped() -> None:
    text = H100_535.read_text(encoding="utf-8")
    renamed = text.replace("        Power Draw                        :",
                           "        Momentary Power Draw              :", 1)
    fragment = NVIDIA_SMI_TEXT.read(renamed, H100_535)
    unplaced = [n for n in fragment.not_served if n.reason.startswith("met but not placed")]
    assert [(n.device, n.field, n.value) for n in unplaced] == \
        [(0, "GPU Power Readings/Momentary Power Draw", "67.74 W")]
    assert "power_w" not in fragment.devices[0]
    lines = not_served_lines(fragment)
    assert "GPU Power Readings/Momentary Power Draw" in lines[0]


def test_no_corpus_capture_has_a_field_left_unplaced() -> None:
    for path in sorted(CORPUS.iterdir()):
        try:
            fragment = read_capture(path)
        except CaptureError:  # evidence files the simulator does not replay
            continue
        assert not [n for n in fragment.not_served
                    if n.reason.startswith("met but not placed")], path.name


def test_sim_up_prints_a_field_it_could_not_place(tmp_path: Path) -> None:
    """`gpu-agent sim up --capture FILE`'s announcement names each field met but not placed."""
    renamed = tmp_path / "renamed.q.txt"
    renamed.write_text(H100_535.read_text(encoding="utf-8").replace(
        "        Power Draw                        :",
        "        Momentary Power Draw              :", 1), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_otel_agent.simulation.node.daemon", "--capture",
         str(renamed), "--dir", str(tmp_path / "node")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        for line in proc.stdout:  # the announcement ends with the attach line
            lines.append(line.rstrip("\n"))
            if line.startswith("export "):
                break
    finally:
        proc.terminate()
        proc.wait(30)
    assert json.loads(lines[0])["ready"] is True
    unplaced = [line for line in lines if "met but not placed" in line]
    assert len(unplaced) == 1
    assert unplaced[0].startswith("# not served: capture renamed.q.txt: GPU 0: "
                                  "GPU Power Readings/Momentary Power Draw = '67.74 W'")
