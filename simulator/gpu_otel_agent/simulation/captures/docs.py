"""``docs/captures.md``, generated from the capture field table, the limits and the corpus index.

Regenerate with ``python -m gpu_otel_agent.simulation.captures.docs --output docs/captures.md``
(``tests/unit/nvidia/test_capture_docs.py`` fails when the committed page differs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_otel_agent.plugins.nvidia.capture import fields
from gpu_otel_agent.simulation.captures.nvidia_smi import limits
from gpu_otel_agent.simulation.captures.registry import capture_formats

_INTRO = """\
# Captures of real machines

A capture is what a vendor tool printed on a real machine. The simulated node can serve the GPUs
of a capture as printed, the agent can write one of the node it sees, and the test suite checks
the agent against the public captures in `examples/captures/` (listed with their sources in
[`examples/captures/INDEX.md`](../examples/captures/INDEX.md)).

## Replay a capture

```sh
gpu-agent sim up --capture examples/captures/nvidia/h100-sxm-x8-535.161.08.q.txt
gpu-agent sim up --capture a.xml --capture b.txt          # several machines on one node
gpu-agent run --simulate scenario.yaml                     # with capture: in the scenario
```

In a scenario, `capture: FILE` or `capture: [FILE, ...]` (paths relative to the scenario file)
puts the captures' GPUs first, in order, then the scenario's own `devices`. Indices in the
scenario's `processes` and `timeline` name devices of that combined list, so a timeline can fault
a captured GPU (`{at: 5s, device: 0, xid: 79}`). The driver and CUDA versions are the scenario's
own, else the first capture's.

Values are served as printed: `81559 MiB` as 81559, `P0` as 0, `Enabled`/`Yes`/`Active` as 1.
What the capture prints as not available (`N/A`, `[N/A]`, `Not Supported`, `[Unknown Error]`,
`Requested functionality has been deprecated`) is answered with NVML_ERROR_NOT_SUPPORTED. A
field the capture does not print at all (an older driver, `nvidia-smi -q -d ...`) keeps the
simulator's value for the model.

Formats read: {formats}. Formats are registered in `CAPTURE_FORMATS` of
`gpu_otel_agent.simulation.captures.registry` (a `CaptureFormat` turns a file into scenario
entries; AMD's `amd-smi` JSON plugs in the same way).

## Write a capture

```sh
gpu-agent capture --out node.xml            # the NVIDIA GPUs NVML shows, as nvidia-smi -q -x
gpu-agent capture --keep-names              # keep process names (scrubbed by default)
gpu-agent capture --vendor amd              # AMD GPUs as amd-smi static/metric --json
```

It reads every field below through NVML, from a real driver or from a simulated node (set the
environment `gpu-agent sim up` prints), and writes each at its XML path, so that a capture
attached to a bug report replays as the node it came from. Process names are written as
`[scrubbed]` unless `--keep-names`; the format carries no host name or command line.

## Fields

Each row: the field's XML path under `<gpu>` (`a+b`: the sum of both; newer drivers split ECC
counts by SRAM and DRAM), its `nvidia-smi -q` label path, the scenario key that serves it, the
NVML call a client reads it through, and what the agent exports it as.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    formats = ", ".join(f"`{f.name}`" for f in capture_formats())
    out = [_INTRO.replace("{formats}", formats)]
    out.append("| XML | `nvidia-smi -q` | scenario key | NVML | exported as | description |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for f in fields.FIELDS:
        exported = ""
        if f.metric is not None:
            if f.metric.startswith("attr:"):
                exported = f"attribute `{f.metric[5:]}`"
            else:
                point = ", ".join(f"{k}={v}" for k, v in f.point.items())
                exported = f"`{f.metric}`" + (f" ({point})" if point else "")
        xml = "<br>".join(f"`{p}`" for p in f.xml)
        text = "<br>".join(f"`{p}`" for p in f.text)
        out.append(f"| {xml} | {text} | `{f.key}` | {_cell(f.nvml)} | {exported} | "
                   f"{_cell(f.description)} |")
    out.append("")
    out.append("Clocks event reasons: one `Active` / `Not Active` per reason under "
               "`clocks_event_reasons` (`clocks_throttle_reasons` before schema v12), served as "
               f"the bit mask of `{fields.CLOCK_EVENTS_NVML}` and exported as "
               "`gpu.clock.throttle`:")
    out.append("")
    out.append("| reason (`gpu.clock.throttle.reason`) | bit | XML tag | `-q` label |")
    out.append("| --- | --- | --- | --- |")
    for name, bit, tag, label in fields.CLOCK_EVENT_REASONS:
        out.append(f"| `{name}` | `{bit:#x}` | `clocks_event_reason_{tag}` | {label} |")
    out.append("")
    out.append("Structures:")
    out.append("")
    out.append("| capture | NVML | exported as | how |")
    out.append("| --- | --- | --- | --- |")
    for capture, nvml, exported, how in fields.STRUCTURES:
        out.append(f"| {_cell(capture)} | {_cell(nvml)} | {_cell(exported)} | {_cell(how)} |")
    out.append("")
    out.append("## What is not served as printed")
    out.append("")
    out.append("| field | why |")
    out.append("| --- | --- |")
    for what, why in limits.RULES:
        out.append(f"| {_cell(what)} | {_cell(why)} |")
    out.append("")
    out.append("## Fields met but not placed")
    out.append("")
    out.append("The reader accounts for every field printed at the GPU's top level and in each "
               "section a row above reads from. A field there that no row places (a newer "
               "driver's spelling) is never dropped silently: `gpu-agent sim up` prints one "
               "line per such field when the node is ready (`# not served: capture FILE: GPU "
               "n: PATH = 'VALUE': met but not placed ...`, before the other fields not served "
               "as printed), and the simulator's value for the model is served. Only these "
               "names are known there and deliberately not served:")
    out.append("")
    out.append("| where | names (XML tag or `-q` label, `_` read as a space) |")
    out.append("| --- | --- |")
    for where, names in limits.UNREAD:
        out.append(f"| {_cell(where)} | {_cell(', '.join(names))} |")
    out.append("")
    out.append("Where the agent's export differs from a corpus capture (the comparison test "
               "`tests/integration/test_captures.py` fails on any other difference, and on a "
               "listed one that no longer differs):")
    out.append("")
    out.append("| capture | field | printed | reason |")
    out.append("| --- | --- | --- | --- |")
    for d in limits.DIVERGENCES:
        out.append(f"| `{d.capture}` | `{d.field}` | `{d.printed}` | {_cell(d.reason)} |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_otel_agent.simulation.captures.docs")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    text = render()
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
