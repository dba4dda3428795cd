"""The local endpoint: what it serves, what it refuses, who may connect.

A real Unix socket served by the real endpoint thread; permissions are checked by connecting
as another user (``setpriv``), not by reading the mode bits alone.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent import unix_socket
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.verdict import EngineView, HealthBoard
from gpu_otel_agent.local import client
from gpu_otel_agent.local.client import LocalClientError, get
from gpu_otel_agent.local.endpoint import LocalEndpoint, LocalEndpointError
from gpu_otel_agent.local.recent_events import EventRing
from gpu_otel_agent.local.routes import Sources, build_routes
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)

GROUP = "adm"  # a group every Debian-based image has; root is not a member
POD = (("container.id", "c0ffee"), ("k8s.namespace.name", "team-a"),
       ("k8s.pod.name", "trainer-0"), ("k8s.pod.uid", "uid-1"),
       ("k8s.container.name", "main"))


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory: these tests take the plain path (a socket path that fits sun_path,
    108 bytes); longer ones are bound through their directory (test_long_paths.py)."""
    directory = Path(tempfile.mkdtemp(prefix="ga-local-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _store() -> SnapshotStore:
    store = SnapshotStore()
    gpu = DeviceIdentity("GPU-0", 0, "nvidia", "NVIDIA H100 80GB HBM3", "00000000:18:00.0")
    mig = DeviceIdentity("MIG-1", 0, "nvidia", "NVIDIA H100 80GB HBM3", "00000000:18:00.0",
                         DevicePartition("GPU-0", "mig", "3g.40gb"))
    store.put(DeviceSnapshot(gpu, HealthState.OK, 1).with_sample(GroupSample("fast", (
        Reading("hw.gpu.utilization", 0.5, (("hw.gpu.task", "general"),)),
        Reading("hw.temperature", 61.0, (("hw.sensor_location", "gpu"),)),
    ), 5)))
    store.put(DeviceSnapshot(mig, HealthState.OK, 1).with_sample(GroupSample("processes", (
        Reading("gpu.process.memory.usage", 2048,
                (("process.pid", 42), ("process.executable.name", "python"), *POD)),
        Reading("gpu.process.utilization", 0.25,
                (("process.pid", 42), ("process.executable.name", "python"),
                 ("hw.gpu.task", "general"), *POD)),
        Reading("gpu.container.memory.usage", 2048, POD),
    ), 6)))
    # The health engine's view wins when worse (an XID the sampler cannot see).
    HealthBoard(store).engine_view("GPU-0", EngineView(HealthState.FAILED, (), (
        Reading("gpu.xid.errors", 1, (("gpu.xid.code", 79),)),)))
    return store


def _event(n: int) -> HealthEvent:
    return HealthEvent("gpu.xid", n, Severity.FATAL, f"event {n}",
                       (("gpu.index", 0),),
                       workloads=((("process.pid", 9), ("k8s.pod.name", "trainer-0")),))


@pytest.fixture
def served(short_dir: Path) -> Iterator[tuple[LocalEndpoint, EventRing]]:
    ring = EventRing(3)
    endpoint = LocalEndpoint(short_dir / "agent.sock", GROUP, build_routes(
        Sources(_store(), ring, {"version": "test", "pid": os.getpid()})))
    endpoint.start()
    yield endpoint, ring
    endpoint.stop()


def test_snapshot_names_devices_partitions_health_and_pods(
        served: tuple[LocalEndpoint, EventRing]) -> None:
    endpoint, _ = served
    document = get(endpoint.path, "/v1/snapshot")
    assert document["agent"]["pid"] == os.getpid()
    gpu, mig = document["devices"]
    assert (gpu["uuid"], gpu["health"], gpu["parent"]) == ("GPU-0", "failed", None)
    assert {"metric": "hw.temperature", "value": 61.0,
            "attributes": {"hw.sensor_location": "gpu"}} in gpu["readings"]
    assert {"metric": "gpu.xid.errors", "value": 1,
            "attributes": {"gpu.xid.code": 79}} in gpu["readings"]
    assert (mig["parent"], mig["partition"]["profile"]) == ("GPU-0", "3g.40gb")
    assert mig["processes"] == [{
        "pid": 42, "executable": "python", "memory_bytes": 2048, "utilization": 0.25,
        "container_id": "c0ffee", "container": "main", "pod": "trainer-0", "pod_uid": "uid-1",
        "namespace": "team-a", "slurm_job": None}]
    # Per-process and per-container series are in "processes", not repeated as readings.
    assert not [r for r in mig["readings"] if r["metric"].startswith("gpu.")]


def test_events_after_a_sequence_number_and_what_the_ring_dropped(
        served: tuple[LocalEndpoint, EventRing]) -> None:
    endpoint, ring = served
    assert get(endpoint.path, "/v1/events")["events"] == []
    for n in range(1, 6):
        ring.append(_event(n))
    everything = get(endpoint.path, "/v1/events?after=0")
    assert [e["seq"] for e in everything["events"]] == [3, 4, 5]  # capacity 3
    assert (everything["last_seq"], everything["missed"]) == (5, 2)
    newer = get(endpoint.path, "/v1/events?after=4")
    assert [(e["seq"], e["body"], e["severity"]) for e in newer["events"]] == [
        (5, "event 5", "FATAL")]
    assert newer["events"][0]["workloads"] == [{"process.pid": 9, "k8s.pod.name": "trainer-0"}]
    assert newer["missed"] == 0
    with pytest.raises(LocalClientError, match="after='x'"):
        get(endpoint.path, "/v1/events?after=x")


def _raw(path: Path, request: bytes) -> tuple[str, dict[str, object]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(str(path))
        client.sendall(request)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), json.loads(body)


def test_read_only_and_unknown_routes_are_refused_with_the_route_list(
        served: tuple[LocalEndpoint, EventRing]) -> None:
    endpoint, _ = served
    # The shared HTTP/1.1 server answers an HTTP/1.0 request with an HTTP/1.1 status line
    # (RFC 9110 6.2), then closes the connection.
    for method in ("POST", "PUT", "DELETE"):
        status, body = _raw(endpoint.path, f"{method} /v1/events HTTP/1.0\r\n\r\n".encode())
        assert status.startswith("HTTP/1.1 405"), status
        assert "read-only" in str(body["error"])
        assert body["routes"] == ["/v1/events", "/v1/health", "/v1/snapshot"]
    status, body = _raw(endpoint.path, b"GET /v1/nothing HTTP/1.0\r\n\r\n")
    assert status.startswith("HTTP/1.1 404")
    assert body["routes"] == ["/v1/events", "/v1/health", "/v1/snapshot"]
    status, body = _raw(endpoint.path,
                        b"GET /v1/snapshot HTTP/1.0\r\nX: " + b"x" * 9000 + b"\r\n\r\n")
    assert status.startswith("HTTP/1.1 431")
    assert "too large" in str(body["error"])
    status, body = _raw(endpoint.path, b"GET /v1/snapshot\r\n\r\n")  # no HTTP version
    assert status.startswith("HTTP/1.1 400")
    assert body["routes"] == ["/v1/events", "/v1/health", "/v1/snapshot"]
    # The endpoint still serves after every refusal.
    assert get(endpoint.path, "/v1/snapshot")["devices"]


def test_socket_is_0660_in_the_configured_group(
        served: tuple[LocalEndpoint, EventRing]) -> None:
    endpoint, _ = served
    info = endpoint.path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o660
    assert (info.st_uid, info.st_gid) == (os.getuid(), grp.getgrnam(GROUP).gr_gid)


PROBE = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from gpu_otel_agent.local.client import LocalClientError, get
try:
    print(len(get(Path(sys.argv[1]), "/v1/snapshot")["devices"]))
except LocalClientError as error:
    print(error)
"""


def _as(user_args: list[str], path: Path) -> str:
    """Connect from another user's process (the endpoint's own checks do not run there)."""
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is part of every test image"
    os.chmod(path.parent, 0o755)  # the directory is traversable; the socket decides
    # The other user may not be able to enter the clone (a 0700 temporary directory) or its
    # virtualenv: it runs the base interpreter, isolated, on copies of the real client module
    # and the one it imports (both standard library only) in a directory it can read, under
    # empty package files.
    with tempfile.TemporaryDirectory(prefix="ga-probe-") as probe_dir:
        os.chmod(probe_dir, 0o755)
        package = Path(probe_dir) / "gpu_otel_agent"
        (package / "local").mkdir(parents=True)
        for init in (package / "__init__.py", package / "local" / "__init__.py"):
            init.touch()
        shutil.copy(client.__file__, package / "local" / "client.py")
        shutil.copy(unix_socket.__file__, package / "unix_socket.py")
        for made in (package, package / "local"):
            os.chmod(made, 0o755)
        for copied in package.rglob("*.py"):
            os.chmod(copied, 0o644)
        done = subprocess.run(
            [setpriv, *user_args, os.path.realpath(sys.executable), "-I", "-c", PROBE,
             str(path), probe_dir],
            check=False, capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_other_users_cannot_connect_and_group_members_can(
        served: tuple[LocalEndpoint, EventRing]) -> None:
    endpoint, _ = served
    nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
    assert "permission denied" in _as(nobody, endpoint.path)
    member = ["--reuid=65534", "--regid=65534", f"--groups={grp.getgrnam(GROUP).gr_gid}"]
    assert _as(member, endpoint.path) == "2"


def _endpoint(path: Path) -> LocalEndpoint:
    return LocalEndpoint(path, None, build_routes(Sources(SnapshotStore(), None, {})))


def test_world_writable_directory_is_refused(short_dir: Path) -> None:
    open_dir = short_dir / "open"
    open_dir.mkdir()
    open_dir.chmod(0o1777)
    with pytest.raises(LocalEndpointError, match="world-writable"):
        _endpoint(open_dir / "agent.sock").start()
    assert not (open_dir / "agent.sock").exists()


def test_a_stale_socket_is_replaced_a_live_one_and_other_files_are_not(short_dir: Path) -> None:
    path = short_dir / "agent.sock"
    path.write_text("not a socket")
    with pytest.raises(LocalEndpointError, match="not a socket"):
        _endpoint(path).start()
    assert path.read_text() == "not a socket"
    path.unlink()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # bound, never listening: what an agent killed with SIGKILL leaves
    first = _endpoint(path)
    first.start()
    try:
        with pytest.raises(LocalEndpointError, match="served by another process"):
            _endpoint(path).start()
        assert get(path, "/v1/events")["health_events"] is False
    finally:
        first.stop()
    assert not path.exists()  # removed at stop
    with pytest.raises(LocalClientError, match="no agent serves"):
        get(path, "/v1/snapshot")


def test_a_socket_name_too_long_for_a_unix_socket_is_named(short_dir: Path) -> None:
    # A deep directory is served (tests/unit/local/test_long_paths.py); a file name that
    # cannot fit a socket address even through its directory is refused before anything.
    path = short_dir / ("x" * 120) / ("n" * 90)
    with pytest.raises(LocalEndpointError, match=r"longer than the 107 bytes.*at most 82 bytes"):
        _endpoint(path).start()
    assert not path.parent.exists()
