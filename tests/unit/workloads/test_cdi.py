"""CDI spec files and the NVIDIA driver's /proc files, as the claim mapping reads them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.kubernetes.cdi import CdiRegistry, CdiSpecError, DeviceNode, parse_spec
from gpu_otel_agent.plugins.kubernetes.nvidia_nodes import device_ids, read_driver
from tests.integration.dra_files import (
    ClaimedDevice,
    Gpu,
    cap_minor,
    spec_path,
    write_claim,
    write_driver,
)

GPU = Gpu("GPU-00000000-0000-4000-8000-00000000000a", 2, "00000000:3B:00.0")
UID = "0b4c8a4e-52a4-4bd3-9f2b-4e8a9c7d2f10"


def test_the_mig_minor_layout_is_the_one_the_dra_driver_quotes() -> None:
    # k8s-dra-driver-gpu internal/common/nvcaps.go quotes /proc/driver/nvidia-caps/mig-minors.
    assert cap_minor(0, 0) == 3 and cap_minor(0, 0, 0) == 4 and cap_minor(0, 0, 2) == 6
    assert cap_minor(3, 3, 3) == 439 and cap_minor(6, 11, 7) == 920


def test_a_claim_spec_as_the_dra_driver_writes_it_gives_its_devices_nodes(
    tmp_path: Path,
) -> None:
    write_claim(tmp_path, UID, [ClaimedDevice("gpu-2", 2),
                                ClaimedDevice("gpu-2-mig-1g10gb-19-5", 2, (5, 0))])
    devices = parse_spec(spec_path(tmp_path, UID).read_text())
    kind = "k8s.gpu.nvidia.com/claim"
    assert devices[f"{kind}={UID}-gpu-2"] == (DeviceNode("/dev/nvidia2", "/dev/nvidia2"),)
    mig = devices[f"{kind}={UID}-gpu-2-mig-1g10gb-19-5"]
    assert [n.minor for n in mig] == [None, cap_minor(2, 5), cap_minor(2, 5, 0)]


@pytest.mark.parametrize(("text", "error"), [
    ("devices: []", "no cdiVersion"),
    ("cdiVersion: 0.6.0\nkind: gpu\ndevices: []", "vendor/class"),
    ("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices: [{containerEdits: {}}]", "without a name"),
    ("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: x\n  containerEdits:\n"
     "    deviceNodes: [{type: c}]", "without a path"),
    ("{not yaml: [", "not JSON/YAML"),
])
def test_a_file_that_is_no_cdi_spec_is_refused_clearly(text: str, error: str) -> None:
    with pytest.raises(CdiSpecError, match=error):
        parse_spec(text)


def test_the_registry_follows_files_and_skips_bad_ones(tmp_path: Path) -> None:
    registry = CdiRegistry(tmp_path)
    name = f"k8s.gpu.nvidia.com/claim={UID}-gpu-2"
    registry.refresh()
    assert registry.nodes(name) is None
    write_claim(tmp_path, UID, [ClaimedDevice("gpu-2", 2)])
    bad = tmp_path / "etc" / "cdi" / "broken.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{")
    registry.refresh()
    assert registry.nodes(name) == (DeviceNode("/dev/nvidia2", "/dev/nvidia2"),)
    # The claim is prepared again for another GPU (same file, new contents), then released.
    path = write_claim(tmp_path, UID, [ClaimedDevice("gpu-2", 3)]) and spec_path(tmp_path, UID)
    os.utime(path, ns=(1, 1))  # a new stamp even within the file system's time resolution
    registry.refresh()
    assert registry.nodes(name) == (DeviceNode("/dev/nvidia3", "/dev/nvidia3"),)
    path.unlink()
    registry.refresh()
    assert registry.nodes(name) is None


def test_device_nodes_become_gpu_and_mig_ids(tmp_path: Path) -> None:
    write_driver(tmp_path, [GPU])
    driver = read_driver(tmp_path / "proc" / "driver")
    assert driver.uuids == {2: GPU.uuid}
    whole = (DeviceNode("/dev/nvidia2", "/dev/nvidia2"),)
    assert device_ids(whole, driver) == (GPU.uuid,)
    mig = (*whole, DeviceNode("/dev/nvidia-caps/nvidia-cap1", "", cap_minor(2, 5)),
           DeviceNode("/dev/nvidia-caps/nvidia-cap2", "", cap_minor(2, 5, 1)))
    assert device_ids(mig, driver) == (f"MIG-{GPU.uuid}/5/1",)  # the minor field, not the path
    assert device_ids((DeviceNode("/dev/nvidia7", "/dev/nvidia7"),), driver) == ()
    assert device_ids(whole, read_driver(tmp_path / "nowhere")) == ()
