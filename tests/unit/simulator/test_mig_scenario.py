"""The scenario's ``mig:`` entries and the MIG profile tables: what fits, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node.scenario import ScenarioError, load_scenario
from gpu_otel_agent.simulation.nvidia.mig_profiles import (
    MODELS,
    MigConfigError,
    check,
    memory_mib,
)
from gpu_otel_agent.simulation.nvidia.models import model_readings
from tests.unit.simulator.simhelpers import write_scenario

A100 = """
devices:
  - model: NVIDIA A100-SXM4-80GB
    mig:
{instances}
processes:
  - {{device: 0, mig: {process_mig}, pid: 4242}}
timeline:
  - {{at: 1s, device: 0, xid: 43, mig: {xid_mig}}}
"""


def _scenario(tmp_path: Path, instances: str, process_mig: int = 0, xid_mig: int = 0) -> Path:
    return write_scenario(tmp_path, A100.format(instances=instances, process_mig=process_mig,
                                                xid_mig=xid_mig))


def test_instances_processes_and_xids_on_instances(tmp_path: Path) -> None:
    sc = load_scenario(_scenario(tmp_path, "      - {profile: 3g.40gb, memory_used_mib: 20000,"
                                           " sm_active: 40}\n"
                                           "      - {profile: 1g.10gb}\n", 1, 1))
    (device,) = sc.devices
    assert device.mig is not None
    assert [m.profile for m in device.mig] == ["3g.40gb", "1g.10gb"]
    assert device.mig[0].readings == {"memory_used_mib": 20000.0, "sm_active": 40.0}
    assert sc.processes[0].mig == 1
    assert sc.timeline[0].args["mig"] == 1


@pytest.mark.parametrize(("instances", "message"), [
    ("      - {profile: 5g.50gb}\n", "unknown MIG profile '5g.50gb'"),
    ("      - {profile: 7g.80gb}\n      - {profile: 1g.10gb}\n", "8 compute slices"),
    ("      - {profile: 4g.40gb}\n      - {profile: 4g.40gb}\n", "8 compute slices"),
    ("      - {profile: 1g.20gb}\n" * 5, "10 memory slices, the GPU has 8"),
    ("      - {profile: 1g.10gb+me}\n" * 2, "at most 1 instance(s) of 1g.10gb+me"),
    ("      - {profile: 3g.40gb, utilization_gpu: 5}\n", "unknown key 'utilization_gpu'"),
    ("      - {memory_used_mib: 5}\n", "missing key 'profile'"),
])
def test_configurations_the_gpu_cannot_hold_are_refused(tmp_path: Path, instances: str,
                                                         message: str) -> None:
    with pytest.raises(ScenarioError, match=r"devices\[0\]\.mig") as error:
        load_scenario(_scenario(tmp_path, instances))
    assert message in str(error.value)


def test_a_process_on_an_instance_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"processes\[0\]\.mig: device 0 has 1 MIG"):
        load_scenario(_scenario(tmp_path, "      - {profile: 3g.40gb}\n", process_mig=1))
    with pytest.raises(ScenarioError, match=r"timeline\[0\]\.mig: device 0 has 1 MIG"):
        load_scenario(_scenario(tmp_path, "      - {profile: 3g.40gb}\n", xid_mig=3))


def test_a_gpu_without_mig_support_is_refused(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, """
        devices:
          - model: NVIDIA L4
            mig: [{profile: 1g.10gb}]
        """)
    with pytest.raises(ScenarioError, match="does not support MIG"):
        load_scenario(path)


SEVEN_SLICE = sorted(m for m in MODELS if any(p.slices == 7 for p in MODELS[m].profiles.values()))


def test_every_model_but_rtx_pro_is_of_seven_slices() -> None:
    assert set(MODELS) - set(SEVEN_SLICE) == {
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"}


@pytest.mark.parametrize("model", SEVEN_SLICE)
def test_every_model_holds_seven_one_slice_instances_and_one_full_one(model: str) -> None:
    profiles = MODELS[model].profiles
    smallest = next(p.name for p in profiles.values() if p.slices == 1 and p.memory_slices == 1
                    and not p.name.endswith("+me"))
    assert len(check(model, [smallest] * 7)) == 7
    (full,) = [p for p in profiles.values() if p.slices == 7]
    total = model_readings(model)["memory_total_mib"]
    assert isinstance(total, float | int)
    # Below the whole frame buffer: the driver reserves some (real -lgip captures).
    assert 0.98 * total < memory_mib(full, total, model) < total
    with pytest.raises(MigConfigError):
        check(model, [full.name, smallest])


def test_profile_names_follow_each_models_memory() -> None:
    assert "1g.5gb" in MODELS["NVIDIA A100-SXM4-40GB"].profiles
    assert "3g.40gb" in MODELS["NVIDIA A100-SXM4-80GB"].profiles
    assert "3g.40gb" in MODELS["NVIDIA H100 80GB HBM3"].profiles
    assert "7g.141gb" in MODELS["NVIDIA H200"].profiles


@pytest.mark.parametrize(("model", "profile", "mib"), [
    # nvidia-smi mig -lgip on real machines (mig_profiles.REPORTED_GIB has the sources)
    ("NVIDIA A100-SXM4-80GB", "1g.10gb", 9.50 * 1024),
    ("NVIDIA A100-SXM4-80GB", "2g.20gb", 19968),  # nvitop#8: NVML's MIG device total
    ("NVIDIA A100-SXM4-80GB", "3g.40gb", 39.25 * 1024),
    ("NVIDIA A100-SXM4-80GB", "4g.40gb", 39.25 * 1024),  # the same four memory slices
    ("NVIDIA A100-SXM4-40GB", "3g.20gb", 20096),  # seansiddens/mps-test
    ("NVIDIA H100 PCIe", "1g.10gb", 9984),  # a Scaleway H100 PCIe's MIG devices
    ("NVIDIA H100 80GB HBM3", "7g.80gb", 79.25 * 1024),
    ("NVIDIA H200", "1g.18gb", 16.00 * 1024),
    ("NVIDIA H200", "3g.71gb", 69.50 * 1024),
    ("NVIDIA H200", "7g.141gb", 139.75 * 1024),
])
def test_instance_memory_is_what_real_gpus_report(model: str, profile: str, mib: float) -> None:
    total = model_readings(model)["memory_total_mib"]
    assert isinstance(total, float | int)
    (chosen,) = check(model, [profile])
    assert memory_mib(chosen, total, model) == mib
    assert mib < total * chosen.memory_slices / 8  # below the slice fraction


LAYOUT = """
devices:
  - model: NVIDIA A100-SXM4-80GB
    mig:
{instances}
processes:
  - {{device: 0, mig: 0, pid: 4242{process}}}
timeline:
  - {{at: 1s, device: 0, xid: 43, mig: 0{xid}}}
"""


def _layout(tmp_path: Path, instances: str, process: str = "", xid: str = "") -> Path:
    return write_scenario(tmp_path, LAYOUT.format(instances=instances, process=process, xid=xid))


def test_real_layouts_ids_compute_instances_indices_and_ci_positions(tmp_path: Path) -> None:
    sc = load_scenario(_layout(
        tmp_path,
        "      - profile: 3g.40gb\n"
        "        gpu_instance_id: 2\n"
        "        memory_used_mib: 20000\n"
        "        compute_instances:\n"
        "          - {profile: 1c.3g.40gb, mig_index: 1, sm_active: 30}\n"
        "          - {profile: 2c.3g.40gb, compute_instance_id: 4,"
        " uuid: MIG-00000000-0000-5000-8000-000000000001}\n"
        "      - {profile: 1g.10gb, gpu_instance_id: 13, mig_index: 5, memory_total_mib: 9800}\n",
        process=", ci: 1", xid=", ci: 1"))
    (device,) = sc.devices
    assert device.mig is not None
    big, small = device.mig
    assert (big.gpu_instance_id, small.gpu_instance_id) == (2, 13)
    assert [(c.profile, c.compute_instance_id, c.mig_index) for c in big.compute_instances] == [
        ("1c.3g.40gb", None, 1), ("2c.3g.40gb", 4, None)]
    assert big.compute_instances[0].readings == {"sm_active": 30.0}
    assert big.readings == {"memory_used_mib": 20000.0}
    assert small.compute_instances[0].mig_index == 5 and small.memory_total_mib == 9800
    assert sc.processes[0].ci == 1 and sc.timeline[0].args["ci"] == 1


@pytest.mark.parametrize(("instances", "message"), [
    ("      - {profile: 3g.40gb, compute_instances: [{profile: 2c.3g.40gb},"
     " {profile: 2c.3g.40gb}]}\n", "need 4 compute slices, the 3g.40gb GPU instance has 3"),
    ("      - {profile: 3g.40gb, compute_instances: [{profile: 4c.3g.40gb}]}\n",
     "holds compute instances of 1, 2, 3 slice(s)"),
    ("      - {profile: 3g.40gb, compute_instances: [{profile: 1c.4g.40gb}]}\n",
     "expected '<n>c.3g.40gb' or '3g.40gb'"),
    ("      - {profile: 3g.40gb, compute_instances: []}\n", "expected a non-empty list"),
    ("      - {profile: 3g.40gb, compute_instances: [{compute_instance_id: 1},"
     " {compute_instance_id: 1}]}\n", "compute_instance_id 1 is given twice"),
    ("      - {profile: 3g.40gb, mig_index: 1, compute_instances: [{}]}\n",
     "give 'mig_index' per compute instance"),
    ("      - {profile: 3g.40gb, gpu_instance_id: 2}\n"
     "      - {profile: 1g.10gb, gpu_instance_id: 2}\n", "gpu_instance_id 2 is given twice"),
    ("      - {profile: 3g.40gb, mig_index: 1}\n      - {profile: 1g.10gb, mig_index: 1}\n",
     "mig_index 1 is given twice"),
    ("      - {profile: 3g.40gb, mig_index: 7}\n", "must be < 7"),
    ("      - {profile: 3g.40gb, uuid: GPU-1}\n", "starts with 'MIG-'"),
    ("      - {profile: 3g.40gb, compute_instances: [{memory_used_mib: 5}]}\n",
     "unknown key 'memory_used_mib'"),  # memory is the GPU instance's
])
def test_layouts_the_gpu_cannot_have_are_refused(tmp_path: Path, instances: str,
                                                 message: str) -> None:
    with pytest.raises(ScenarioError, match=r"devices\[0\]\.mig") as error:
        load_scenario(_layout(tmp_path, instances))
    assert message in str(error.value)


def test_a_ci_position_needs_its_gpu_instance_and_must_exist(tmp_path: Path) -> None:
    one = "      - {profile: 3g.40gb}\n"
    with pytest.raises(ScenarioError, match=r"processes\[0\]\.ci: GPU instance 0 of device 0 "
                                            r"has 1 compute instance"):
        load_scenario(_layout(tmp_path, one, process=", ci: 1"))
    with pytest.raises(ScenarioError, match=r"timeline\[0\]\.ci: GPU instance 0"):
        load_scenario(_layout(tmp_path, one, xid=", ci: 2"))
    no_mig = write_scenario(tmp_path, """
devices:
  - model: NVIDIA A100-SXM4-80GB
    mig: [{profile: 3g.40gb}]
processes:
  - {device: 0, pid: 4242, ci: 0}
""", "no-mig.yaml")
    with pytest.raises(ScenarioError, match=r"processes\[0\]\.ci: 'ci' needs 'mig'"):
        load_scenario(no_mig)


def test_rtx_pro_6000_holds_four_quarters_as_the_mig_guide_lists() -> None:
    """NVIDIA's MIG user guide, RTX PRO 6000 Blackwell: 1g = 1/4 (up to 4), 2g = 1/2 (up to 2),
    4g = all; GPU instance ids by memory fraction as on every MIG GPU (quarters from 3)."""
    from gpu_otel_agent.simulation.nvidia import mig_profiles

    model = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    for fits in (["1g.24gb"] * 4, ["2g.48gb", "1g.24gb+gfx", "1g.24gb-me"], ["4g.96gb+gfx"],
                 ["2g.48gb"] * 2):
        assert [p.name for p in mig_profiles.check(model, fits)] == fits
    for too_much in (["1g.24gb"] * 5, ["2g.48gb"] * 3, ["4g.96gb", "1g.24gb"],
                     ["1g.24gb+me.all", "1g.24gb+me.all"]):
        with pytest.raises(mig_profiles.MigConfigError):
            mig_profiles.check(model, too_much)
    quarter, half, whole = (mig_profiles.check(model, [n])[0]
                            for n in ("1g.24gb", "2g.48gb", "4g.96gb"))
    assert [mig_profiles.placement_id(p, 0) for p in (quarter, half, whole)] == [3, 1, 0]
    assert [mig_profiles.sm_count(p, model) for p in (quarter, half, whole)] == [47, 94, 188]
    total = model_readings(model)["memory_total_mib"]
    assert isinstance(total, float | int)
    assert 0.98 * total < memory_mib(whole, total, model) < total
