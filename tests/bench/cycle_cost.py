"""Instructions per agent cycle, counted by callgrind: a figure a shared machine cannot blur.

Wall-clock CPU percentages on a machine other work shares move by more than the changes they
should judge. Instruction counts of a fixed amount of work do not: this runs the agent's own
code for ``--cycles`` cycles in a child process attached to the simulated node, under
``valgrind --tool=callgrind``, once with 0 cycles and once with N, and reports the difference
divided by N (start-up and imports cancel out).

One cycle, per stage:

- ``sample``: every GPU's ``fast`` group read through ``NvidiaBackend`` (pynvml -> the
  simulated library), and its processes every 5th cycle, as the agent's defaults do;
- ``processes``: every GPU's processes only, every cycle: the lists and utilization samples
  (``read_processes``) and their readings from attribution (``Attribution.readings``);
- ``export``: a snapshot with those samples, ``ProtoEncoder.encode_request`` (series + encoding);
- ``telemetry``: ``export`` with the agent's self-telemetry in each snapshot, as
  ``SnapshotStore.current`` takes it: ``SelfTelemetry.sample`` over a ``DeviceSampler`` per GPU
  (not run; its counters moved each cycle as a cycle moves them), the devices' library call
  times and errors, export and reliability counters; the sampling counted with the encoding;
- ``snapshot``: the event loop's "snapshot" and "self-telemetry" stages as the agent runs
  them, without the loop or the devices' threads: each GPU's reads published through
  ``DeviceSampler._sampled`` (values as read before the cycles; fast every cycle, gpm every
  10th, slow every 30th), the health engine as its observer and the health board as its
  health report, each GPU's attributed processes put into the store every 5th cycle; then
  the exporter's ``SnapshotStore.current`` with the agent's self-telemetry as its agent
  source (the samplers, the devices' library call times and errors, export counters,
  reliability, the health pipeline's counters; ``Agent._build_telemetry`` with health on,
  /metrics off, as the agent's defaults); nothing encoded. The setup is frozen out of the
  collector's sight first (``gc.freeze``), as the agent's start-up is. Use a multiple of 30
  cycles.
- ``scrape``: one ``/metrics`` page (otel scheme, text 0.0.4) of that snapshot;
- ``send``: one OTLP/gRPC export of that snapshot (encoded once, before the cycles) through the
  agent's own sender (``GrpcTransport`` on its ``GrpcClient``, as ``OtlpSnapshotExporter``
  calls it) to a grpcio server in another process (``tests.bench.sink_server``), so only the
  sender's instructions count; ``WARM_EXPORTS`` before the cycles open the connection and
  bring its HPACK tables to their steady state.
- ``loop``: the agent's sampling as it runs, event loop and threads included: a
  ``DeviceSampler`` per GPU of the node, with their ``Relay`` and attribution, one
  ``SnapshotStore`` they (and attribution) publish into and the exporter's ``current`` of it
  once per fast interval, on the loop
  policy the agent uses (uvloop where installed), the groups at agent-8gpu-1s's ratios to a
  ``--interval`` fast interval (processes 5x, gpm 10x, slow 30x). Started just before a
  multiple of the slow interval on the loop clock, so every run meets the same ticks (the
  default ``--interval`` of 3 s leaves callgrind's 50-100x slower Python room on a loaded
  machine); the first reads (probes, every group once) and the first three fast cycles are in
  both runs (3 cycles and 3 + N); a run ends when every device has read each group as often as its
  cycles bring (use a multiple of 30 for the agent's whole mix of groups; 10 leaves the slow
  group out). A missed cycle or a call overrun (callgrind too slow for the interval) fails
  the run.

``python -m tests.bench.cycle_cost SCENARIO --cycles 20 --stage sample`` prints JSON. Run it
against two trees (``PYTHONPATH=<tree>/agent``) to compare commits; the figures of issue 41's
commits were taken so.

``--pause S`` sleeps S seconds of wall time before each cycle (not counted). The simulated
node records a utilization sample per process every 0.5 s and keeps 1.5 s of them, and a
read returns those newer than the last: without a pause, a slower tree reads more samples per
cycle under callgrind than a faster one, so the processes stage's work is not the same. With
``--pause 2`` every read returns each process's whole history (four samples): the same work
in every tree.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

STAGES = ("sample", "processes", "export", "telemetry", "snapshot", "scrape", "send", "loop")
# agent-8gpu-1s's intervals as multiples of its fast interval (1 s; the others' defaults).
LOOP_GROUPS = {"fast": 1, "processes": 5, "gpm": 10, "slow": 30}
PROCESS_EVERY = 5
VARIANTS = 3
WARM_EXPORTS = 100  # send: more than the HPACK table holds of changing timeouts


def _child(node_env: dict[str, str], stage: str, cycles: int, writer: str = "current",
           *, pause: float = 0.0, sink: str = "", interval: float = 1.0) -> None:
    if stage == "loop":
        _run_loop(_loop_cycles(node_env, cycles, interval))
        return
    if stage == "snapshot":
        asyncio.run(_snapshot_cycles(node_env, cycles))
        return
    asyncio.run(_cycles(node_env, stage, cycles, writer, pause=pause, sink=sink))


def _run_loop(coroutine: Any) -> None:
    """The agent's loop policy (``cli._run_loop``): uvloop where installed."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)
        return
    uvloop.run(coroutine)


class _Counted:
    """The samplers' observer: counts each device's reads per group and ends the run when
    every device has read every group ``expected`` times (nothing is timed)."""

    def __init__(self, expected: dict[str, int], devices: int) -> None:
        self._expected = expected
        self._short = devices * len(expected)
        self.counts: dict[tuple[str, str], int] = {}
        self.done = asyncio.Event()

    def sampled(self, uuid: str, group: str, readings: object) -> None:
        key = (uuid, group)
        count = self.counts[key] = self.counts.get(key, 0) + 1
        if count == self._expected.get(group):
            self._short -= 1
            if self._short == 0:
                self.done.set()

    def unresponsive(self, uuid: str, call: str | None, seconds: float) -> None: ...

    def responsive(self, uuid: str) -> None: ...

    def lost(self, uuid: str, reason: str) -> None: ...

    def available(self, uuid: str) -> None: ...


async def _loop_cycles(node_env: dict[str, str], cycles: int, interval: float) -> None:
    from gpu_otel_agent.simulation.node import attach_in_process

    attach_in_process(node_env)

    from dataclasses import replace

    from gpu_otel_agent.config.holder import ConfigHolder
    from gpu_otel_agent.config.schema import (
        AgentConfig,
        AttributionConfig,
        GroupConfig,
        KubeletConfig,
    )
    from gpu_otel_agent.model.snapshot import SnapshotStore
    from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
    from gpu_otel_agent.runtime.attribution_setup import attribution_parts, workload_service
    from gpu_otel_agent.sampling.sampler import DeviceSampler
    from gpu_otel_agent.threads.relay import Relay
    from gpu_otel_agent.workloads.lifecycle import netlink_events

    backend = NvidiaBackend()
    backend.open()
    devices = backend.devices()
    # One store for the samplers and attribution, as the agent has (publishing into it, joining
    # processes and devices in ``current`` are the sampling's snapshot stage).
    store = SnapshotStore()
    attribution_config = AttributionConfig(kubelet=KubeletConfig(socket=None))
    parts = attribution_parts(attribution_config, store)
    attribution = parts.attribution
    service = workload_service(attribution_config, parts.resolver, netlink_events)
    running = asyncio.create_task(service.run())
    await asyncio.sleep(0.2)
    running.cancel()  # as in the other stages: other people's execs must not count
    with contextlib.suppress(asyncio.CancelledError):
        await running
    groups = {g: GroupConfig(True, interval * k) for g, k in LOOP_GROUPS.items()}
    # A deadline callgrind's slowness cannot reach (its timer costs the same at any length).
    config = ConfigHolder(replace(AgentConfig(), groups=MappingProxyType(groups),
                                  call_timeout=60.0))
    served = {g for device in devices for g in device.probe()} & set(groups)
    counted = _Counted({g: 1 + cycles // LOOP_GROUPS[g] for g in served}, len(devices))
    # Callgrind runs Python 50-100x slower: the agent's 50 ms before a round is released
    # would release nearly every round, and the legs would run at once, as on a hung node.
    relay = Relay(pass_on_after_s=interval / 2)
    samplers = [DeviceSampler(device, store, config, attribution=attribution,
                              observer=counted, relay=relay) for device in devices]
    # Start 0.45 of an interval before a tick of the slowest group: every run then meets the
    # same ticks (each group's next read is the first on its grid half an interval after the
    # first), and the first reads (probes, every group) have 1.45 intervals to finish.
    loop = asyncio.get_running_loop()
    slowest = interval * max(LOOP_GROUPS.values())
    await asyncio.sleep((-0.45 * interval - loop.time()) % slowest)
    tasks = [asyncio.create_task(s.run()) for s in samplers]
    tasks.append(asyncio.create_task(_take_snapshots(store, interval)))
    await counted.done.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    missed = sum(s.stats.missed_cycles + s.stats.deadline_overruns for s in samplers)
    extra = {k: v for k, v in counted.counts.items() if v != 1 + cycles // LOOP_GROUPS[k[1]]}
    if missed or extra:
        raise RuntimeError(f"{missed} missed cycles or overruns, reads off count {extra}: "
                           "callgrind too slow for the interval, use a longer --interval")
    for sampler in samplers:
        sampler.close()
    backend.close()


async def _take_snapshots(store: Any, interval: float) -> None:
    """The exporter's ``store.current`` once per fast interval, half an interval after each
    tick (between the reads), as the agent's 1 s export takes it (self-telemetry not set)."""
    loop = asyncio.get_running_loop()
    # A moment per interval, from the grid (a timer that fires a little early must not
    # bring a second snapshot in the same interval).
    due = loop.time() + (0.5 * interval - loop.time()) % interval
    while True:
        await asyncio.sleep(due - loop.time())
        store.current(time.time_ns())
        due += interval


async def _snapshot_cycles(node_env: dict[str, str], cycles: int) -> None:
    from gpu_otel_agent.simulation.node import attach_in_process

    attach_in_process(node_env)

    from gpu_otel_agent.backends.discovery import OpenBackend
    from gpu_otel_agent.config.holder import ConfigHolder
    from gpu_otel_agent.config.schema import AgentConfig, AttributionConfig, KubeletConfig
    from gpu_otel_agent.export.metrics.pusher import ExportStats
    from gpu_otel_agent.gpu_health.verdict import HealthBoard
    from gpu_otel_agent.model.snapshot import GroupSample, SnapshotStore
    from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
    from gpu_otel_agent.runtime.agent import build_resource
    from gpu_otel_agent.runtime.attribution_setup import build_attribution
    from gpu_otel_agent.runtime.health_pipeline import HealthRuntime
    from gpu_otel_agent.runtime.reliability import ReliabilityValues
    from gpu_otel_agent.runtime.self_telemetry import ExportValues, SelfTelemetry
    from gpu_otel_agent.sampling.partitions import TreeRead
    from gpu_otel_agent.sampling.sampler import DeviceSampler
    from gpu_otel_agent.threads.relay import Relay

    backend = NvidiaBackend()
    info = backend.open()
    devices = backend.devices()
    # Attribution's sources not run: the processes are read once, before the cycles, and
    # what other people's execs bring would only blur the count.
    attribution, _ = build_attribution(AttributionConfig(kubelet=KubeletConfig(socket=None)))
    every = {"fast": 1, "gpm": 10, "slow": 30}
    reads: list[dict[str, list[Any]]] = []
    processes: list[list[Any]] = []
    for device in devices:
        names = device.probe()
        if "gpm" in names:
            device.read("gpm")
        reads.append({g: [tuple(device.read(g)) for _ in range(VARIANTS)]
                      for g in every if g in names})
        reader: Any = device  # a ProcessReader (NVIDIA)
        processes.append([GroupSample("processes", attribution.readings(
            device.identity, reader.read_processes()), time.time_ns())
            for _ in range(VARIANTS)])
    config = AgentConfig()
    opened = [OpenBackend(backend, info, tuple(devices))]
    store = SnapshotStore()
    board = HealthBoard(store)
    health = HealthRuntime(config, build_resource(config, opened), opened, store,
                           attribution, board=board)
    holder = ConfigHolder(config)
    samplers = [DeviceSampler(device, store, holder, attribution=attribution,
                              observer=health.engine, relay=Relay(), health=board)
                for device in devices]
    stats = ExportStats()
    telemetry = SelfTelemetry(time.time_ns())
    telemetry.watch_samplers(samplers)
    telemetry.watch_devices(devices)
    telemetry.add(ExportValues(stats))
    telemetry.add(ReliabilityValues())
    telemetry.add(health.values())
    store.set_agent_source(telemetry.sample)
    # What start-up made is out of the collector's sight, as the agent does once started
    # (Agent.run): a full collection then walks what the cycles allocate, not the setup's
    # process readings (which made the count move in steps with the heap).
    gc.freeze()
    for cycle in range(cycles):
        for i, sampler in enumerate(samplers):
            for group, k in every.items():
                if cycle % k == 0 and group in reads[i]:
                    tree = TreeRead(reads[i][group][(cycle // k) % VARIANTS])
                    sampler._sampled(group, tree, time.perf_counter())
            if cycle % PROCESS_EVERY == 0:
                store.put_processes(sampler.snapshot.identity.uuid,
                                    processes[i][(cycle // PROCESS_EVERY) % VARIANTS])
        store.current(time.time_ns())
        stats.exports += 1
    for sampler in samplers:
        sampler.close()
    health.engine.close()
    backend.close()


async def _cycles(node_env: dict[str, str], stage: str, cycles: int, writer: str,
                  *, pause: float = 0.0, sink: str = "") -> None:
    from gpu_otel_agent.simulation.node import attach_in_process

    attach_in_process(node_env)

    from gpu_otel_agent.backends.discovery import OpenBackend
    from gpu_otel_agent.config.load import load
    from gpu_otel_agent.config.schema import AttributionConfig, KubeletConfig
    from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
    from gpu_otel_agent.export.metrics.series import series
    from gpu_otel_agent.export.prometheus.exposition import Families, render
    from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
    from gpu_otel_agent.model.snapshot import (
        DeviceSnapshot,
        GroupSample,
        HealthState,
        NodeSnapshot,
        Reading,
    )
    from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
    from gpu_otel_agent.runtime.agent import build_resource
    from gpu_otel_agent.runtime.attribution_setup import build_attribution

    backend = NvidiaBackend()
    info = backend.open()
    devices = backend.devices()
    groups = [sorted(device.probe()) for device in devices]
    # Process series come from the process lists through attribution, as the agent's
    # processes group does (not the backend's read of the group, which has none).
    # Its sources running (netlink, inotify), as in the agent: a process's facts are read
    # once and kept, so its series' attributes are the same objects from cycle to cycle.
    attribution, service = build_attribution(AttributionConfig(kubelet=KubeletConfig(socket=None)))
    running = asyncio.create_task(service.run())
    await asyncio.sleep(0.2)

    def process_readings(device: Any) -> tuple[Reading, ...]:
        return attribution.readings(device.identity, device.read_processes())
    snapshots = []
    # Values as the node serves them over time (its patterns are random and sine): the export
    # and scrape stages cycle through these, so consecutive cycles carry different values.
    fast: list[list[tuple[Reading, ...]]] = []
    processes: list[list[tuple[Reading, ...]]] = []
    for device, names in zip(devices, groups, strict=True):
        if "gpm" in names:
            device.read("gpm")
        samples = {g: GroupSample(g, device.read(g), time.time_ns()) for g in names}
        fast.append([device.read("fast") for _ in range(VARIANTS)])
        processes.append([process_readings(device) for _ in range(VARIANTS)])
        samples["processes"] = GroupSample("processes", processes[-1][0], time.time_ns())
        snapshots.append(DeviceSnapshot(device.identity, HealthState.OK, time.time_ns(),
                                        MappingProxyType(samples)))
    resource = build_resource(load(None), [OpenBackend(backend, info, tuple(devices))])
    encoder = ProtoEncoder(resource)
    attributes = dict(resource.attributes)
    write: Callable[[Families], bytes] = render
    if writer == "handwritten":  # the writer prometheus_client replaced (issue 33.5)
        from tests.bench.exposition import BASELINE, _old_writers

        write = _old_writers(BASELINE)["text"]

    # The sources stop before the counted cycles: their threads would count what the rest of
    # a shared machine does (every exec on the host is a netlink event).
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    telemetry = _Telemetry(devices, attribution) if stage == "telemetry" else None
    if stage == "send":
        _send(sink, encoder.encode_bytes(NodeSnapshot(tuple(snapshots), time.time_ns())),
              cycles)
        backend.close()
        return
    for cycle in range(cycles):
        if pause:
            time.sleep(pause)
        if stage in ("sample", "processes"):
            for device in devices:
                if stage == "sample":
                    device.read("fast")
                if stage == "processes" or cycle % PROCESS_EVERY == 0:
                    process_readings(device)
            continue
        # As the store publishes them: the fast group new each cycle (values as read),
        # the processes group every 5th, the rest kept (the same sample objects).
        for i, previous in enumerate(snapshots):
            kept = previous.with_sample(GroupSample("fast", fast[i][cycle % VARIANTS],
                                                    time.time_ns()))
            if cycle % PROCESS_EVERY == 0 and "processes" in kept.samples:
                kept = kept.with_sample(GroupSample(
                    "processes", processes[i][(cycle // PROCESS_EVERY) % VARIANTS],
                    time.time_ns()))
            snapshots[i] = kept
        if telemetry is not None:
            telemetry.step(cycle)
            now = time.time_ns()
            current = NodeSnapshot(tuple(snapshots), now, agent=telemetry.sample(now))
        else:
            current = NodeSnapshot(tuple(snapshots), time.time_ns())
        if stage in ("export", "telemetry"):
            encoder.encode_request(current)
        else:
            write(otel_families(series(current), attributes))
    if telemetry is not None:
        telemetry.close()
    backend.close()


class _Telemetry:
    """The agent's self-telemetry (``Agent._build_telemetry``'s sources, but the Prometheus
    endpoint's and the health pipeline's) over samplers that are not run: ``step`` moves
    their counters as a cycle would."""

    def __init__(self, devices: list[Any], attribution: Any) -> None:
        from gpu_otel_agent.config.holder import ConfigHolder
        from gpu_otel_agent.config.schema import AgentConfig
        from gpu_otel_agent.export.metrics.pusher import ExportStats
        from gpu_otel_agent.model.snapshot import SnapshotStore
        from gpu_otel_agent.runtime.reliability import ReliabilityValues
        from gpu_otel_agent.runtime.self_telemetry import ExportValues, SelfTelemetry
        from gpu_otel_agent.sampling.sampler import DeviceSampler
        from gpu_otel_agent.threads.relay import Relay

        relay = Relay()
        config = ConfigHolder(AgentConfig())
        self.samplers = [DeviceSampler(device, SnapshotStore(), config,
                                       attribution=attribution, relay=relay)
                         for device in devices]
        self.stats = ExportStats()
        stats = self.stats
        self._telemetry = SelfTelemetry(time.time_ns())
        self._telemetry.watch_samplers(self.samplers)
        self._telemetry.watch_devices(devices)
        self._telemetry.add(ExportValues(stats))
        self._telemetry.add(ReliabilityValues())

    def step(self, cycle: int) -> None:
        for i, sampler in enumerate(self.samplers):
            groups = ("fast", "processes") if cycle % PROCESS_EVERY == 0 else ("fast",)
            for group in groups:
                seconds = 0.001 * (1 + (cycle + i) % 7)
                sampler.stats.cycles += 1
                sampler.stats.read_seconds_total += seconds
                sampler.stats.last_read_seconds[group] = seconds
        self.stats.exports += 1

    def sample(self, now_ns: int) -> Any:
        return self._telemetry.sample(now_ns)

    def close(self) -> None:
        for sampler in self.samplers:
            sampler.close()


def _send(sink: str, request: bytes, cycles: int) -> None:
    """``cycles`` exports of ``request`` to the sink at ``sink`` (host:port), after
    ``WARM_EXPORTS``; each must succeed (a failing send costs something else)."""
    from gpu_otel_agent.export.otlp.grpc_transport import GrpcTransport
    from gpu_otel_agent.export.otlp.senders import export_method
    from gpu_otel_agent.export.otlp.target import OtlpTarget
    from gpu_otel_agent.threads.costs import SENDING, Stage

    target = OtlpTarget(protocol="grpc", signal="METRICS", endpoint=sink, tls=False,
                        headers=(), timeout_s=10.0, compression=None, certificate=None,
                        client_key=None, client_certificate=None)
    transport = GrpcTransport(target, export_method("METRICS"))
    for _ in range(WARM_EXPORTS):
        if not transport.send(request).ok:
            raise RuntimeError(f"the sink at {sink} refused an export")
    for _ in range(cycles):
        with Stage(SENDING):  # as OtlpSnapshotExporter.export sends
            ok = transport.send(request, 10.0).ok
        if not ok:
            raise RuntimeError(f"the sink at {sink} refused an export")
    transport.shutdown()


@contextlib.contextmanager
def _sink(stage: str) -> Iterator[str]:
    """The ``send`` stage's receiver (host:port), a grpcio server in its own process."""
    if stage != "send":
        yield ""
        return
    with subprocess.Popen([sys.executable, "-m", "tests.bench.sink_server"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None and server.stdin is not None
        try:
            yield f"127.0.0.1:{int(server.stdout.readline())}"
        finally:
            server.stdin.close()  # it stops when its input ends
            server.wait(timeout=30)


def _instructions(scenario: Path, stage: str, cycles: int, env: dict[str, str], *,
                  writer: str, pause: float = 0.0, interval: float = 3.0) -> int:
    from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
    from tests.bench.agent_case import node_ready_timeout

    with tempfile.TemporaryDirectory() as work, _sink(stage) as sink, \
            SimulatedNode.start(scenario, state_dir=Path(work) / "node",
                                ready_timeout=node_ready_timeout(load_scenario(scenario))) as node:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
             sys.executable, "-m", "tests.bench.cycle_cost", str(scenario), "--child",
             json.dumps(dict(node.env)), "--stage", stage, "--cycles", str(cycles),
             "--writer", writer, "--pause", str(pause), "--sink", sink,
             "--interval", str(interval)],
            capture_output=True, text=True, env=env, check=False, timeout=3000)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise RuntimeError(f"callgrind run failed:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def main() -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--stage", choices=STAGES, default="sample")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--writer", choices=("current", "handwritten"), default="current",
                        help="scrape stage: this tree's writer, or the hand-written one "
                             "prometheus_client replaced (loaded from git)")
    parser.add_argument("--pause", type=float, default=0.0, metavar="S",
                        help="wall-clock seconds before each cycle, not counted (see above)")
    parser.add_argument("--interval", type=float, default=3.0,
                        help="loop stage: the fast interval in seconds (the others in ratio)")
    parser.add_argument("--child", metavar="NODE_ENV")
    parser.add_argument("--sink", default="", help=argparse.SUPPRESS)  # send: host:port
    args = parser.parse_args()
    if args.child:
        _child(json.loads(args.child), args.stage, args.cycles, args.writer,
               pause=args.pause, sink=args.sink, interval=args.interval)
        return 0
    env = dict(os.environ, PYTHONHASHSEED="0")  # the same dict and set layouts every run
    # The loop stage's base run has three cycles: its first reads (probes, every group) may
    # run late on a loaded machine, a device a whole tick behind the others, and the base run
    # would end with the others' next tick in it; three cycles on, they are in step again.
    first = 3 if args.stage == "loop" else 0
    base = _instructions(args.scenario, args.stage, first, env, writer=args.writer,
                         pause=args.pause, interval=args.interval)
    total = _instructions(args.scenario, args.stage, first + args.cycles, env,
                          writer=args.writer, pause=args.pause, interval=args.interval)
    json.dump({"stage": args.stage, "cycles": args.cycles, "scenario": args.scenario.name,
               "writer": args.writer, "pause_s": args.pause,
               "instructions_per_cycle": (total - base) / args.cycles}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
