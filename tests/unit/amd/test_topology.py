"""How amdsmi processors become physical GPUs and partitions, and what each is named."""

from __future__ import annotations

from gpu_otel_agent.plugins.amd.topology import (
    Processor,
    parent_id,
    partition_ids,
    socket_uuid,
    sockets,
)

SERIAL = 0xD3A51C2B17F0E6A9
MI300X = 0x74A1


def _proc(bdf: str, uuid: str, mode: str | None = "CPX", pid: int | None = None,
          serial: int | None = SERIAL) -> Processor:
    return Processor(handle=bdf, uuid=uuid, bdf=bdf, model="AMD Instinct MI300X", serial=serial,
                     device_id=MI300X, compute_mode=mode, memory_mode="NPS1" if mode else None,
                     partition_id=pid)


def test_socket_uuid_is_amdsmi_uuid_gen_with_function_0xff() -> None:
    # Worked by hand from amd_smi_uuid.cc (0ceca28): time_low = did | fcn << 16 | serial[63:56]
    # << 24, clock-seq byte = serial[55:48] under variant 0b10, node = serial[47:0].
    assert socket_uuid(SERIAL, MI300X) == "d3ff74a1-0000-1000-80a5-1c2b17f0e6a9"


def test_processors_group_by_bdf_without_function_ordered_by_partition() -> None:
    shared = socket_uuid(SERIAL, MI300X)
    procs = [_proc("0000:0c:00.1", shared, pid=1), _proc("0000:2c:00.0", "other", mode="SPX"),
             _proc("0000:0c:00.0", shared, pid=0)]
    cpx, spx = sockets(procs)
    assert [p.bdf for p in cpx.processors] == ["0000:0c:00.0", "0000:0c:00.1"]
    assert cpx.partitioned and not spx.partitioned
    assert parent_id(cpx) == shared
    assert partition_ids(procs, cpx, shared) == [f"{shared}/xcp0", f"{shared}/xcp1"]


def test_unique_partition_uuids_name_them_and_the_parent_keeps_its_name() -> None:
    procs = [_proc("0000:0c:00.0", "u-0"), _proc("0000:0c:00.1", "u-1")]
    (cpx,) = sockets(procs)
    assert parent_id(cpx) == socket_uuid(SERIAL, MI300X)
    assert partition_ids(procs, cpx, parent_id(cpx)) == ["u-0", "u-1"]  # ids from the BDF


def test_without_a_serial_the_shared_uuid_names_the_parent_and_never_a_partition() -> None:
    procs = [_proc("0000:0c:00.0", "same", serial=None), _proc("0000:0c:00.1", "same",
                                                                serial=None)]
    (cpx,) = sockets(procs)
    assert parent_id(cpx) == "same"
    assert partition_ids(procs, cpx, "same") == ["same/xcp0", "same/xcp1"]
