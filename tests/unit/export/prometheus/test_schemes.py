"""Both naming schemes, parsed back by prometheus_client's own exposition parser."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.prometheus.dcgm_scheme import DcgmTranslator
from gpu_otel_agent.export.prometheus.exposition import Families, render
from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)
from tests.unit.export.prometheus.snapshots import POD_A, POD_B, UUIDS, device, node

RESOURCE = {"service.name": "gpu-otel-agent", "host.name": "vm-1", "k8s.node.name": "gpu-node-7"}


def parsed(families: Families) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = render(families).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
            if family.type == "counter" and sample.name != family.name:
                # the parser names a counter's sample X_total even where the text says X
                # (dcgm-exporter's counters have no _total): keep the name as written too
                out.setdefault(family.name, []).append((sample.labels, sample.value))
    return out


def one(samples: dict[str, list[tuple[dict[str, str], float]]], name: str,
        **labels: str) -> float:
    matches = [v for lab, v in samples[name] if all(lab.get(k) == w for k, w in labels.items())]
    assert len(matches) == 1, (name, labels, samples.get(name))
    return matches[0]


def test_otel_scheme_names_labels_and_values() -> None:
    samples = parsed(otel_families(series(node()), RESOURCE))
    assert one(samples, "hw_gpu_utilization_ratio", hw_id=UUIDS[0],
               hw_gpu_task="general") == pytest.approx(0.37)
    assert one(samples, "hw_gpu_memory_usage_bytes", hw_id=UUIDS[0]) == 40000 * 1024 * 1024
    assert one(samples, "hw_energy_joules_total", hw_id=UUIDS[1]) == pytest.approx(1234.5)
    status = one(samples, "hw_status", hw_id=UUIDS[0], hw_state="ok", hw_type="gpu")
    assert status == 1
    assert one(samples, "gpu_agent_exports_completed_total") == 7
    info = one(samples, "target_info", k8s_node_name="gpu-node-7")
    assert info == 1
    labels = next(lab for lab, _ in samples["hw_power_watts"] if lab["hw_id"] == UUIDS[0])
    # hw.power lists hw.type but not the GPU's vendor/model (model/hardware v1.44.0).
    assert labels == {"hw_id": UUIDS[0], "hw_type": "gpu", "gpu_index": "0",
                      "gpu_pci_bus_id": "00000000:18:00.0"}


def test_dcgm_scheme_matches_dcgm_exporter_units_and_labels() -> None:
    samples = parsed(DcgmTranslator(RESOURCE).families(series(node())))
    assert one(samples, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == 37  # percent, not 36.99999
    assert one(samples, "DCGM_FI_DEV_ENC_UTIL", gpu="1") == 5
    assert one(samples, "DCGM_FI_DEV_FB_USED", gpu="0") == 40000  # MiB
    assert one(samples, "DCGM_FI_DEV_FB_FREE", gpu="0") == 81559 - 40000 - 520
    assert one(samples, "DCGM_FI_DEV_SM_CLOCK", gpu="0") == 1980  # MHz
    assert one(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="1") == 1234500  # mJ
    assert one(samples, "DCGM_FI_DEV_POWER_VIOLATION", gpu="0") == 2.5e6  # us
    assert one(samples, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu="0") == 3
    assert one(samples, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gpu="0") == 0x4 | 0x8
    labels = next(lab for lab, _ in samples["DCGM_FI_DEV_GPU_UTIL"] if lab["gpu"] == "1")
    assert labels == {"gpu": "1", "UUID": UUIDS[1], "device": "nvidia1",
                      "modelName": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:19:00.0",
                      "hostname": "gpu-node-7", "NodeName": "gpu-node-7",
                      # the pod the GPU is allocated to, as dcgm-exporter's Kubernetes mode
                      "pod": "infer-a", "namespace": "ml", "container": "server"}


def test_dcgm_device_series_per_pod_on_shared_gpus_and_without_pods_on_idle_ones() -> None:
    now = 5_000_000_000
    snapshot = NodeSnapshot((device(0, 0.6, 100, now, pods=(POD_A, POD_B)),
                             device(1, 0.2, 100, now, pods=())), now)
    samples = parsed(DcgmTranslator(RESOURCE).families(series(snapshot)))
    shared = {lab.get("pod"): v for lab, v in samples["DCGM_FI_DEV_GPU_UTIL"] if lab["gpu"] == "0"}
    assert shared == {"infer-a": 60, "infer-b": 60}  # dcgm-exporter repeats the GPU's value
    (idle,) = [lab for lab, _ in samples["DCGM_FI_DEV_GPU_UTIL"] if lab["gpu"] == "1"]
    assert not {"pod", "namespace", "container"} & set(idle)
    assert len([1 for lab, _ in samples["DCGM_FI_DEV_FB_FREE"] if lab["gpu"] == "0"]) == 2


def test_dcgm_scheme_per_process_and_container_names_for_autoscaling() -> None:
    samples = parsed(DcgmTranslator(RESOURCE).families(series(node())))
    assert one(samples, "DCGM_CUSTOM_PROCESS_SM_UTIL", gpu="0", PodName="infer-a",
               NamespaceName="ml", ContainerName="server", ProcessId="4242",
               NodeName="gpu-node-7") == 25
    assert one(samples, "DCGM_CUSTOM_PROCESS_MEM_USED", gpu="1", PodName="infer-a") == 2048
    assert one(samples, "DCGM_CUSTOM_CONTAINER_MEM_ALLOCATED", gpu="0",
               PodName="infer-a") == 8192


def test_dcgm_scheme_serves_what_dcgm_has_no_name_for_under_otel_names() -> None:
    samples = parsed(DcgmTranslator(RESOURCE).families(series(node())))
    assert one(samples, "hw_status", hw_id=UUIDS[1], hw_state="ok") == 1  # alerts use it
    assert one(samples, "gpu_clock_frequency_hertz", hw_id=UUIDS[0],
               gpu_clock_domain="graphics") == 1755e6
    assert one(samples, "gpu_agent_exports_completed_total") == 7
    assert "hw_gpu_utilization_ratio" not in samples  # mapped: served once, as DCGM
    assert "gpu_clock_throttle" not in samples  # folded into the bitmask


def test_hostile_label_values_round_trip_and_duplicates_never_fail_a_scrape() -> None:
    families = Families()
    family = families.family("x", "gauge", "help with \\ and\nnewline")
    assert family is not None
    hostile = 'a"b\\c\nd\u00e9'
    family.add((("name", hostile),), 1.5)
    family.add((("name", hostile),), 2.5)  # same series again: dropped, not a broken scrape
    assert families.family("x", "counter", "other type") is None
    samples = parsed(families)
    assert samples["x"] == [({"name": hostile}, 1.5)]


def test_a_mig_instance_carries_dcgm_exporters_instance_labels_and_its_gpus_uuid() -> None:
    parent = UUIDS[0]
    instance = DeviceIdentity(
        "MIG-11111111-2222-5333-8444-555555555555", 0, "nvidia", "NVIDIA H100 80GB HBM3",
        "00000000:18:00.0",
        DevicePartition(parent, "mig", "3g.40gb",
                        (("gpu.mig.profile", "3g.40gb"), ("gpu.mig.gpu_instance.id", 2),
                         ("gpu.mig.compute_instance.id", 0))))
    now = 5_000_000_000
    mig = DeviceSnapshot(instance, HealthState.OK, 0).with_sample(GroupSample("fast", (
        Reading("hw.gpu.memory.usage", 1000 * 1024 * 1024),
        Reading("hw.gpu.memory.limit", 40960 * 1024 * 1024),
        Reading("gpu.container.memory.usage", 900 * 1024 * 1024, POD_B),
    ), now))
    snapshot = node(now)
    snapshot = NodeSnapshot((*snapshot.devices, mig), now, snapshot.agent, snapshot.health)
    dcgm = parsed(DcgmTranslator(RESOURCE).families(series(snapshot)))
    assert one(dcgm, "DCGM_FI_DEV_FB_USED", GPU_I_ID="2") == 1000
    assert one(dcgm, "DCGM_FI_DEV_FB_FREE", GPU_I_ID="2") == 40960 - 1000
    labels = next(lab for lab, _ in dcgm["DCGM_FI_DEV_FB_USED"] if lab.get("GPU_I_ID") == "2")
    assert labels["UUID"] == parent and labels["gpu"] == "0" and labels["device"] == "nvidia0"
    assert labels["GPU_I_PROFILE"] == "3g.40gb"
    assert labels["pod"] == "infer-b"  # the pod on the instance, on the instance's series
    # The whole GPU's series have no instance labels.
    whole = [lab for lab, _ in dcgm["DCGM_FI_DEV_FB_USED"] if lab["gpu"] == "0"
             and "GPU_I_ID" not in lab]
    assert whole and all(lab["UUID"] == parent for lab in whole)
    otel = parsed(otel_families(series(snapshot), RESOURCE))
    assert one(otel, "hw_gpu_memory_usage_bytes", hw_parent=parent,
               gpu_mig_profile="3g.40gb", gpu_mig_gpu_instance_id="2") == 1000 * 1024 * 1024


def test_alike_compute_instances_of_one_gpu_instance_keep_their_own_dcgm_series() -> None:
    """Two 1c.3g.40gb compute instances of GPU instance 2: dcgm-exporter's labels (the GPU
    instance's profile and id) are the same for both, so one series was dropped as a repeat."""
    parent = UUIDS[0]
    now = 5_000_000_000

    def compute(ci: int, used_mib: int) -> DeviceSnapshot:
        identity = DeviceIdentity(
            f"MIG-11111111-2222-5333-8444-55555555555{ci}", 0, "nvidia", "NVIDIA H100 80GB HBM3",
            "00000000:18:00.0",
            DevicePartition(parent, "mig", "1c.3g.40gb",
                            (("gpu.mig.profile", "3g.40gb"), ("gpu.mig.gpu_instance.id", 2),
                             ("gpu.mig.compute_instance.id", ci),
                             ("gpu.mig.compute_instance.profile", "1c.3g.40gb"))))
        return DeviceSnapshot(identity, HealthState.OK, 0).with_sample(GroupSample("fast", (
            Reading("gpu.sm.utilization", used_mib / 1000),), now))

    snapshot = node(now)
    snapshot = NodeSnapshot((*snapshot.devices, compute(0, 200), compute(1, 700)), now,
                            snapshot.agent, snapshot.health)
    dcgm = parsed(DcgmTranslator(RESOURCE).families(series(snapshot)))
    found = {lab["GPU_CI_ID"]: (lab["GPU_I_PROFILE"], lab["GPU_I_ID"], value)
             for lab, value in dcgm["DCGM_FI_PROF_SM_ACTIVE"] if "GPU_CI_ID" in lab}
    assert found == {"0": ("3g.40gb", "2", 0.2), "1": ("3g.40gb", "2", 0.7)}


def test_amd_partitions_sharing_a_uuid_get_dcgm_instance_labels() -> None:
    parent = "d3ff74a1-0000-1000-80a5-1c2b17f0e6a9"
    now = 5_000_000_000
    parts = []
    for xcp in (0, 1):
        identity = DeviceIdentity(
            f"{parent}/xcp{xcp}", 1, "amd", "AMD Instinct MI300X", f"0000:0c:00.{xcp}",
            DevicePartition(parent, "amd_partition", "CPX",
                            (("amd.partition.id", xcp), ("amd.partition.compute_mode", "CPX"),
                             ("amd.partition.memory_mode", "NPS4"))))
        parts.append(DeviceSnapshot(identity, HealthState.OK, 0).with_sample(GroupSample(
            "fast", (Reading("hw.gpu.memory.usage", (100 + xcp) * 1024 * 1024),), now)))
    snapshot = node(now)
    snapshot = NodeSnapshot((*snapshot.devices, *parts), now, snapshot.agent, snapshot.health)
    dcgm = parsed(DcgmTranslator(RESOURCE).families(series(snapshot)))
    assert one(dcgm, "DCGM_FI_DEV_FB_USED", GPU_I_ID="0", UUID=parent) == 100
    assert one(dcgm, "DCGM_FI_DEV_FB_USED", GPU_I_ID="1", UUID=parent) == 101
    labels = next(lab for lab, _ in dcgm["DCGM_FI_DEV_FB_USED"] if lab.get("GPU_I_ID") == "1")
    assert labels["GPU_I_PROFILE"] == "CPX" and labels["device"] == "amd1"
    otel = parsed(otel_families(series(snapshot), RESOURCE))
    assert one(otel, "hw_gpu_memory_usage_bytes", hw_parent=parent, amd_partition_id="1",
               amd_partition_memory_mode="NPS4") == 101 * 1024 * 1024
