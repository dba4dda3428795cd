"""The ``dcgm-4.9`` scheme against the ``dcgm`` (<= 4.8) one, and the table both read."""

from __future__ import annotations

import re

import pytest

from gpu_otel_agent.docs.migration_doc import migration_markdown
from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.prometheus.dcgm_scheme import FIELDS, DcgmTranslator
from gpu_otel_agent.model.dcgm_names import BY_OLD, RENAMES_49, Source
from tests.unit.export.prometheus.snapshots import UUIDS, node
from tests.unit.export.prometheus.test_schemes import RESOURCE, one, parsed

# The active rows of dcgm-exporter 4.8's etc/default-counters.csv (NVIDIA/dcgm-exporter, tag
# 4.5.3-4.8.2 and main of 2026-05-12; its dcp-metrics-included.csv has the same rows): the
# independent list the 23 renames are counted against.
DEFAULTS_48 = (
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
)
# DCGM 4.6.0 dcgmlib/dcgm_field_naming.py: the grammar's units and suffixes.
NAME = re.compile(r"^DCGM_FI_(DEV|PROF|SYSTEM)_[A-Z0-9_]+$")
UNITS = {"BYTES", "CELSIUS", "HERTZ", "JOULES", "SECONDS", "WATTS"}


def test_the_table_is_the_release_notes_23_renames_and_11_unit_changes() -> None:
    defaults = [r for r in RENAMES_49 if r.default]
    assert len(defaults) == 23
    assert {r.old for r in defaults} <= set(DEFAULTS_48)
    # What 4.8 collects by default and 4.9 does not rename: PCIe bytes and the vGPU licence.
    assert set(DEFAULTS_48) - {r.old for r in defaults} == {
        "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS"}
    changed = [r for r in defaults if r.unit_changed]
    assert len(changed) == 11
    # The five kinds the release notes list, each with its exact factor.
    assert {(r.unit_before, r.unit_after, r.factor) for r in changed} == {
        ("MHz", "Hz", 1e6), ("mJ", "J", 1e-3), ("%", "1", 0.01),
        ("MiB", "By", 1024 * 1024), ("MB/s", "By/s", 1e6)}
    assert [r.new for r in defaults if r.label] == ["DCGM_FI_SYSTEM_DRIVER_VERSION"]
    assert len({r.new for r in RENAMES_49}) == len(RENAMES_49)


def test_new_names_follow_dcgms_grammar_and_composed_ones_carry_their_unit() -> None:
    for row in RENAMES_49:
        assert NAME.match(row.new), row.new
        if row.source is Source.GRAMMAR:
            # A composed name says its unit (the grammar's point): Hz, J, bytes, or a ratio.
            parts = set(row.new.split("_"))
            assert parts & UNITS or row.new.endswith("_RATIO"), row.new
            assert row.unit_changed, row.old


def test_every_renamed_field_the_agent_serves_is_in_the_dcgm_scheme() -> None:
    served = {f.name for f in FIELDS.values()} | {"DCGM_FI_DEV_FB_FREE",
                                                  "DCGM_FI_DRIVER_VERSION"}
    for row in RENAMES_49:
        assert (row.old in served) != ("Not served" in row.note), row.old


def test_dcgm_49_is_dcgm_48_renamed_and_times_the_factor() -> None:
    old = parsed(DcgmTranslator(RESOURCE).families(series(node())))
    new = parsed(DcgmTranslator(RESOURCE, renamed=True).families(series(node())))
    compared = 0
    for name, samples in old.items():
        row = BY_OLD.get(name)
        assert row is None or name not in new, name  # no <= 4.8 name left where 4.9 renamed
        expected = {_renamed_labels(labels): value * (row.factor if row else 1)
                    for labels, value in samples}
        got = {_renamed_labels(labels): value for labels, value in new[row.new if row else name]}
        assert got == pytest.approx(expected), name
        compared += row is not None
    assert compared >= 10  # the renamed fields this snapshot has readings for


def _renamed_labels(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(("DCGM_FI_SYSTEM_DRIVER_VERSION" if k == "DCGM_FI_DRIVER_VERSION" else k, v)
                     for k, v in labels.items())


def test_dcgm_49_values_in_their_new_units() -> None:
    samples = parsed(DcgmTranslator(RESOURCE, renamed=True).families(series(node())))
    assert one(samples, "DCGM_FI_DEV_GPU_UTIL_RATIO", gpu="0") == pytest.approx(0.37)
    assert one(samples, "DCGM_FI_DEV_FB_USED_BYTES", gpu="0") == 40000 * 1024 * 1024
    assert one(samples, "DCGM_FI_DEV_FB_FREE_BYTES", gpu="0") == (81559 - 40000 - 520) * 2**20
    assert one(samples, "DCGM_FI_DEV_SM_CLOCK_HERTZ", gpu="0") == 1980e6
    assert one(samples, "DCGM_FI_DEV_BOARD_ENERGY_JOULES_TOTAL", gpu="1") == pytest.approx(
        1234.5)
    labels = next(lab for lab, _ in samples["DCGM_FI_DEV_GPU_UTIL_RATIO"] if lab["gpu"] == "0")
    assert labels["UUID"] == UUIDS[0] and labels["hostname"] == "gpu-node-7"
    # Not renamed by 4.9: the same name and value as in the dcgm scheme.
    assert one(samples, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu="0") == 3


def test_the_driver_label_is_renamed_in_dcgm_49_only() -> None:
    attributes = (("hw.id", UUIDS[0]), ("gpu.index", 0), ("hw.driver_version", "580.95.05"))
    old = dict(DcgmTranslator(RESOURCE).labels(attributes, custom=False))
    new = dict(DcgmTranslator(RESOURCE, renamed=True).labels(attributes, custom=False))
    assert old["DCGM_FI_DRIVER_VERSION"] == new["DCGM_FI_SYSTEM_DRIVER_VERSION"] == "580.95.05"
    assert "DCGM_FI_SYSTEM_DRIVER_VERSION" not in old and "DCGM_FI_DRIVER_VERSION" not in new


def test_dcgm_49_help_names_the_new_unit() -> None:
    translator = DcgmTranslator(RESOURCE, renamed=True)
    for field in FIELDS.values():
        row = BY_OLD.get(field.name)
        if row is None or not row.unit_changed:
            continue
        name, scale, help_ = translator.named(field.name, field.scale, field.help)
        assert name == row.new and scale == 1  # the OpenTelemetry unit is 4.9's
        assert f"(in {row.unit_before})" not in help_ and "(in " in help_, help_


def test_the_migration_page_lists_every_row() -> None:
    page = migration_markdown()
    for row in RENAMES_49:
        assert f"| `{row.old}`" in page and f"`{row.new}`" in page, row.old
