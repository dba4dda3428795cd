"""Names users build dashboards and alerts on, copied by hand from the telemetry contract
(the project's specs/telemetry.md: "Device attributes", "Device metrics", "Process and workload
metrics", "Events"). Kept apart from the catalogs on purpose: the catalogs are what the code
emits, this is what was promised. A name removed or renamed in a catalog fails
tests/unit/docs/test_docs.py; extend this list only when the contract grows.
"""

from __future__ import annotations

DEVICE_ATTRIBUTES = ("hw.id", "hw.type", "hw.vendor", "hw.model", "gpu.index", "gpu.pci.bus_id")

# metric -> (instrument, unit), device metrics then process and workload metrics
METRICS: dict[str, tuple[str, str]] = {
    "hw.gpu.utilization": ("gauge", "1"),
    "hw.gpu.memory.utilization": ("gauge", "1"),
    "gpu.memory.controller.utilization": ("gauge", "1"),
    "hw.gpu.memory.usage": ("updowncounter", "By"),
    "hw.gpu.memory.limit": ("updowncounter", "By"),
    "gpu.memory.reserved": ("updowncounter", "By"),
    "hw.gpu.io": ("counter", "By"),
    "gpu.nvlink.io": ("counter", "By"),
    "hw.temperature": ("gauge", "Cel"),
    "hw.power": ("gauge", "W"),
    "gpu.power.limit": ("gauge", "W"),
    "hw.energy": ("counter", "J"),
    "gpu.clock.frequency": ("gauge", "Hz"),
    "gpu.clock.throttle": ("updowncounter", "1"),  # corrections: booleans as hw.status
    "gpu.violation.time": ("counter", "s"),
    "hw.fan.speed_ratio": ("gauge", "1"),
    "gpu.performance_state": ("gauge", "{pstate}"),  # not a ratio
    "gpu.pcie.replay": ("counter", "{replay}"),
    "hw.errors": ("counter", "{error}"),
    # The contract said counter; nvml.h counts remaps that became inactive apart, so the
    # figure can go down (issue 28): an UpDownCounter, singular (naming.md, issue 32).
    "gpu.memory.row_remap.count": ("updowncounter", "{row}"),
    "gpu.memory.row_remap.failure": ("updowncounter", "1"),  # in the notes column
    "gpu.memory.page_retirement.count": ("updowncounter", "{page}"),
    "gpu.sm.utilization": ("gauge", "1"),
    "gpu.sm.occupancy": ("gauge", "1"),
    "gpu.tensor.utilization": ("gauge", "1"),
    "gpu.dram.utilization": ("gauge", "1"),
    "gpu.xid.errors": ("counter", "{error}"),
    "hw.status": ("updowncounter", "1"),
    "gpu.process.memory.usage": ("gauge", "By"),
    "gpu.process.utilization": ("gauge", "1"),
    "gpu.container.memory.usage": ("gauge", "By"),
    "gpu.container.utilization": ("gauge", "1"),
    "gpu.container.memory.limit": ("gauge", "By"),
}

WORKLOAD_ATTRIBUTES = (
    "container.id", "k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid", "k8s.container.name",
    "slurm.job.id",
)

# event -> its extra attributes (besides the device attributes)
EVENTS: dict[str, tuple[str, ...]] = {
    "gpu.xid": ("gpu.xid.code", "gpu.xid.name", "gpu.xid.action", "gpu.event.source"),
    "gpu.ecc": ("error.type",),
    "gpu.lost": (),
    "gpu.recovered": (),
    "gpu.unresponsive": ("gpu.call", "gpu.call.duration"),
    "gpu.throttle": ("gpu.clock.throttle.reason",),
    "gpu.health": ("hw.state",),
}
