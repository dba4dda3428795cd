"""A mixed node: NVIDIA GPUs beside a partitioned MI300X whose partitions have readings of their
own. The AMD partitions' own readings are held per amdsmi slot; NVIDIA's slots share those
numbers, and once made NVIDIA GPUs 0-1 read 0 % and 0 MiB (issue 38)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.simulator.simhelpers import run_client, started_node

SCENARIO = """
devices:
  - {model: NVIDIA H100 80GB HBM3, utilization_gpu: 87, memory_used_mib: 40000}
  - {model: NVIDIA H100 80GB HBM3, utilization_gpu: 55, memory_used_mib: 12000}
  - vendor: amd
    model: AMD Instinct MI300X
    partition: {compute: DPX}
    partitions:
      - {utilization_gpu: 90, memory_used_mib: 20000}
      - {utilization_gpu: 10, memory_used_mib: 300}
"""


def test_an_mi300x_partitions_list_leaves_the_nvidia_gpus_readings_alone(tmp_path: Path) -> None:
    with started_node(tmp_path, SCENARIO) as node:
        out = run_client(node, """
            mib = 1024 * 1024
            out = [[N.nvmlDeviceGetUtilizationRates(d).gpu,
                    N.nvmlDeviceGetMemoryInfo(d, version=N.nvmlMemory_v2).used // mib]
                   for d in h]
        """)
    assert out == [[87, 40000], [55, 12000]]
