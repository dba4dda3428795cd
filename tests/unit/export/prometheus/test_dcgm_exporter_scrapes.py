"""The ``dcgm`` scheme against recorded output of real dcgm-exporter releases.

The references are not our expectations: real scrapes posted in public issues and
dcgm-exporter's own expected rendering (tests/unit/export/prometheus/dcgm_exporter_scrapes/README.md
says where each comes from). For the same situation (a GPU a pod holds, an idle GPU, a MIG
instance) the series must carry the same label names with the same identity values, plus only
``NodeName`` (the agent's addition for adapter rules). The DRA label names are dcgm-exporter's
(internal/pkg/transformation/const.go at 4.5.3-4.8.2).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.prometheus.dcgm_scheme import CURRENT, DcgmTranslator
from gpu_otel_agent.export.prometheus.exposition import render
from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)

SCRAPES = Path(__file__).parent / "dcgm_exporter_scrapes"
OURS_ONLY = {"NodeName"}
MIB = 1024 * 1024
_SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)="((?:[^"\\]|\\.)*)"')
# dcgm-exporter 4.5.3-4.8.2, internal/pkg/transformation/const.go (draClaimName ...).
DCGM_DRA_LABELS = {"dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name",
                   "dra_device_name"}
DCGM_DRA_MIG_LABELS = {"dra_mig_profile", "dra_mig_device_uuid"}


def scrape(text: str) -> list[tuple[str, dict[str, str]]]:
    """(metric, labels) of each series line, label order kept."""
    found = []
    for line in text.splitlines():
        matched = _SERIES.match(line)
        if matched:
            found.append((matched.group(1), dict(_LABEL.findall(matched.group(2)))))
    return found


def recorded(name: str) -> list[tuple[str, dict[str, str]]]:
    return scrape((SCRAPES / name).read_text(encoding="utf-8"))


def ours(snapshot: NodeSnapshot, resource: dict[str, object], version: str,
         metric: str) -> list[dict[str, str]]:
    text = render(DcgmTranslator(resource, version).families(series(snapshot))).decode()
    return [labels for name, labels in scrape(text) if name == metric]


def _device(identity: DeviceIdentity, readings: tuple[Reading, ...]) -> DeviceSnapshot:
    return DeviceSnapshot(identity, HealthState.OK, 0).with_sample(
        GroupSample("fast", readings, 1_000))


def _pod(namespace: str, pod: str, container: str, *extra: tuple[str, str]) -> Attributes:
    return (("k8s.namespace.name", namespace), ("k8s.pod.name", pod),
            ("k8s.container.name", container), ("k8s.pod.uid", "uid"), *extra)


def test_whole_gpus_in_kubernetes_mode_match_a_real_scrape() -> None:
    theirs = recorded("h100-pods-driver-label.prom")
    first = theirs[0][1]
    resource = {"host.name": first["Hostname"]}
    devices = []
    for _, labels in theirs:
        identity = DeviceIdentity(labels["UUID"], int(labels["gpu"]), "nvidia",
                                  labels["modelName"], labels["pci_bus_id"],
                                  driver_version=first["DCGM_FI_DRIVER_VERSION"])
        readings = [Reading("hw.gpu.utilization", 0.0, (("hw.gpu.task", "general"),))]
        if "pod" in labels:
            readings.append(Reading("gpu.container.memory.usage", 10 * MIB, _pod(
                labels["namespace"], labels["pod"], labels["container"])))
        devices.append(_device(identity, tuple(readings)))
    mine = ours(NodeSnapshot(tuple(devices), 1_000), resource, "4.5.3-4.8.2",
                "DCGM_FI_DEV_GPU_UTIL")
    assert len(mine) == len(theirs)
    for (_, reference), labels in zip(theirs, sorted(mine, key=lambda lab: lab["gpu"]),
                                      strict=True):
        assert set(labels) - OURS_ONLY == set(reference)
        assert {k: labels[k] for k in reference} == reference


def test_a_mig_instance_matches_a_real_scrape() -> None:
    (_, reference), *_ = recorded("a100-mig-driver-label.prom")
    resource = {"host.name": reference["Hostname"]}
    parent = DeviceIdentity(reference["UUID"], int(reference["gpu"]), "nvidia",
                            reference["modelName"], reference["pci_bus_id"],
                            driver_version=reference["DCGM_FI_DRIVER_VERSION"])
    instance = DeviceIdentity(
        "MIG-6d0a2c8e-0000-5000-8000-000000000008", parent.index, "nvidia", parent.model,
        parent.pci_bus_id, DevicePartition(parent.uuid, "mig", reference["GPU_I_PROFILE"], (
            ("gpu.mig.profile", reference["GPU_I_PROFILE"]),
            ("gpu.mig.gpu_instance.id", int(reference["GPU_I_ID"])),
            ("gpu.mig.compute_instance.id", 0))), driver_version=parent.driver_version)
    snapshot = NodeSnapshot((_device(parent, ()), _device(
        instance, (Reading("gpu.dram.utilization", 0.02),))), 1_000)
    (labels,) = ours(snapshot, resource, "4.5.3-4.8.2", "DCGM_FI_PROF_DRAM_ACTIVE")
    assert set(labels) - OURS_ONLY == set(reference)
    assert {k: labels[k] for k in reference} == reference


@pytest.mark.parametrize(("version", "host"), [(CURRENT, "hostname"),
                                               ("4.5.3-4.8.2", "Hostname")])
def test_the_host_label_follows_the_configured_release(version: str, host: str) -> None:
    (_, reference), = recorded("hostname-render-d5e5f51.prom")
    identity = DeviceIdentity("GPU-test-uuid-0000-0000-0000-000000000000", 0, "nvidia",
                              reference["modelName"], "00000000:18:00.0")
    snapshot = NodeSnapshot((_device(identity, (Reading("hw.power", 100.0),)),), 1_000)
    (labels,) = ours(snapshot, {"host.name": reference["hostname"]}, version,
                     "DCGM_FI_DEV_POWER_USAGE")
    # The render test names its UUID label by a placeholder key ("test-uuid").
    expected = {("UUID" if key == "test-uuid" else key) for key in reference}
    if version == CURRENT:
        assert set(labels) - OURS_ONLY == expected
    else:
        assert set(labels) - OURS_ONLY == expected - {"hostname"} | {"Hostname"}
    assert labels[host] == reference["hostname"]


def _claimed_node() -> NodeSnapshot:
    """A GPU and a MIG instance held through claims (DRA device attributes on their series)."""
    gpu = DeviceIdentity("GPU-aaaaaaaa-0000-4000-8000-000000000000", 0, "nvidia",
                         "NVIDIA A100-SXM4-80GB", "00000000:18:00.0")
    mig = DeviceIdentity("MIG-bbbbbbbb-0000-5000-8000-000000000000", 1, "nvidia",
                         "NVIDIA A100-SXM4-80GB", "00000000:19:00.0", DevicePartition(
                             "GPU-cccccccc-0000-4000-8000-000000000000", "mig", "1g.10gb",
                             (("gpu.mig.profile", "1g.10gb"), ("gpu.mig.gpu_instance.id", 9),
                              ("gpu.mig.compute_instance.id", 0))))
    claim = (("k8s.resourceclaim.name", "gpu-claim"),)
    devices = (
        _device(gpu, (Reading("hw.gpu.memory.usage", 5 * MIB),
                      Reading("gpu.container.memory.usage", 5 * MIB,
                              _pod("ml", "trainer", "main", *claim)))),
        _device(mig, (Reading("hw.gpu.memory.usage", 6 * MIB),
                      Reading("gpu.container.memory.usage", 6 * MIB,
                              _pod("ml", "infer", "main", ("k8s.resourceclaim.name", "mig"),
                                   ("k8s.resourceclaim.namespace", "claims"))))),
    )
    dra = {gpu.uuid: (("gpu.dra.driver", "gpu.nvidia.com"), ("gpu.dra.pool", "node-a"),
                      ("gpu.dra.device", "gpu-0")),
           mig.uuid: (("gpu.dra.driver", "gpu.nvidia.com"), ("gpu.dra.pool", "node-a"),
                      ("gpu.dra.device", "gpu-1-mig-1g10gb-19-0"))}
    return NodeSnapshot(devices, 1_000, device_attributes=dra)


def test_pods_holding_gpus_through_claims_get_dcgm_exporters_dra_labels() -> None:
    labels = ours(_claimed_node(), {"host.name": "node-a"}, CURRENT, "DCGM_FI_DEV_FB_USED")
    gpu, mig = sorted(labels, key=lambda lab: lab["gpu"])
    assert {k for k in gpu if k.startswith("dra_")} == DCGM_DRA_LABELS
    assert {k for k in mig if k.startswith("dra_")} == DCGM_DRA_LABELS | DCGM_DRA_MIG_LABELS
    assert (gpu["dra_claim_name"], gpu["dra_claim_namespace"], gpu["dra_driver_name"],
            gpu["dra_pool_name"], gpu["dra_device_name"]) == (
        "gpu-claim", "ml", "gpu.nvidia.com", "node-a", "gpu-0")
    assert (mig["dra_claim_namespace"], mig["dra_mig_profile"], mig["dra_mig_device_uuid"]) == (
        "claims", "1g.10gb", "MIG-bbbbbbbb-0000-5000-8000-000000000000")
    assert mig["UUID"] == "GPU-cccccccc-0000-4000-8000-000000000000"  # the parent, as ever


def test_releases_before_the_dra_labels_serve_none() -> None:
    labels = ours(_claimed_node(), {"host.name": "node-a"}, "4.2.3-4.2.0",
                  "DCGM_FI_DEV_FB_USED")
    assert labels and not any(k.startswith("dra_") for lab in labels for k in lab)
    assert {lab["pod"] for lab in labels} == {"trainer", "infer"}


def test_series_of_metrics_without_the_gpus_identity_still_carry_its_dcgm_labels() -> None:
    """hw.power and hw.temperature points carry no hw.vendor/hw.model/hw.driver_version (the
    conventions list none for them); their DCGM series still name the device's vendor, model
    and own driver, as dcgm-exporter labels every series (a mixed node: one driver each)."""
    nvidia = DeviceIdentity("GPU-n", 0, "nvidia", "NVIDIA H100 80GB HBM3", "00000000:18:00.0",
                            driver_version="580.95.05")
    amd = DeviceIdentity("a-uuid", 0, "amd", "AMD Instinct MI300X", "0000:0c:00.0",
                         driver_version="6.10.5")
    snapshot = NodeSnapshot(tuple(_device(identity, (Reading("hw.power", 300.0),))
                                  for identity in (nvidia, amd)), 1_000)
    power = {labels["UUID"]: labels for labels in ours(snapshot, {"host.name": "n"}, CURRENT,
                                                       "DCGM_FI_DEV_POWER_USAGE")}
    assert (power["GPU-n"]["device"], power["GPU-n"]["modelName"],
            power["GPU-n"]["DCGM_FI_DRIVER_VERSION"]) == (
        "nvidia0", "NVIDIA H100 80GB HBM3", "580.95.05")
    assert (power["a-uuid"]["device"], power["a-uuid"]["modelName"],
            power["a-uuid"]["DCGM_FI_DRIVER_VERSION"]) == ("amd0", "AMD Instinct MI300X", "6.10.5")
