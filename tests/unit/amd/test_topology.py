"""How amdsmi processors become physical GPUs and partitions, and what each is named."""

from __future__ import annotations

from gpu_otel_agent.plugins.amd.topology import (
    Processor,
    parent_id,
    partition_ids,
    socket_uuid,
    sockets,
    stable_id,
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


def test_partition_names_do_not_change_when_the_library_starts_giving_them_uuids() -> None:
    """ROCm 7.12 puts the partition id into the UUID: the series carry on under the names
    earlier libraries gave them (``<socket uuid>/xcp<N>``)."""
    shared = socket_uuid(SERIAL, MI300X)
    old = [_proc("0000:0c:00.0", shared), _proc("0000:0c:00.1", shared)]
    new = [_proc("0000:0c:00.0", "u-0"), _proc("0000:0c:00.1", "u-1")]
    (before,), (after,) = sockets(old), sockets(new)
    assert parent_id(before) == parent_id(after) == shared
    assert partition_ids(new, after, shared) == partition_ids(old, before, shared) == [
        f"{shared}/xcp0", f"{shared}/xcp1"]


def test_an_spx_mi300x_keeps_its_name_across_the_uuid_change() -> None:
    shared = socket_uuid(SERIAL, MI300X)
    rocm_712 = "d30074a1" + shared[8:]  # the same UUID with partition id 0 as function byte
    assert stable_id(_proc("0000:0c:00.0", rocm_712, mode="SPX")) == shared
    assert stable_id(_proc("0000:0c:00.0", shared, mode="SPX")) == shared
    # A UUID of another part (or given by hand) is the part's name as ever.
    assert stable_id(_proc("0000:0c:00.0", "other", mode="SPX")) == "other"
    assert stable_id(_proc("0000:0c:00.0", rocm_712, mode=None)) == rocm_712  # MI200


def test_without_a_serial_the_shared_uuid_names_the_parent_and_never_a_partition() -> None:
    procs = [_proc("0000:0c:00.0", "same", serial=None), _proc("0000:0c:00.1", "same",
                                                                serial=None)]
    (cpx,) = sockets(procs)
    assert parent_id(cpx) == "same"
    assert partition_ids(procs, cpx, "same") == ["same/xcp0", "same/xcp1"]
