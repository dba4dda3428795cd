"""Regenerate ``api_pb2.py`` and ``api_pb2.pyi`` from the vendored ``api.proto`` (development only).

    python -m gpu_otel_agent.plugins.kubernetes.regenerate          # rewrite the two files
    python -m gpu_otel_agent.plugins.kubernetes.regenerate --check  # exit 1 if they are stale

Needs grpcio-tools (the ``dev`` extra pins it, so the output is reproducible; its protoc sets
the protobuf runtime the generated code accepts, which is why ``protobuf`` is pinned to the
same major version with that floor). Run it from a source checkout (an editable install links
this file back to it); it writes next to ``api.proto``.

The proto is compiled under the virtual path ``gpu_otel_agent/plugins/kubernetes/api.proto``:
the generated module then knows its own import name, and the descriptor it registers in
protobuf's default pool has a file name no other package uses (upstream's is ``api.proto``).
Only messages are generated, no gRPC stubs: the agent does not use grpcio at run time. Its
client (``podresources``) makes each call through the agent's own unary gRPC client
(``gpu_otel_agent.grpc.unary_client``) with messages written and read by hand (``wire``,
tested against these generated classes, which the simulated kubelet and the tests use).
grpcio-tools is a development tool here, for its protoc only.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VIRTUAL = "gpu_otel_agent/plugins/kubernetes"
GENERATED = ("api_pb2.py", "api_pb2.pyi")


def source_dir() -> Path:
    """The checkout folder holding ``api.proto`` (this file resolves to it when linked)."""
    here = Path(__file__).resolve().parent
    if not (here / "api.proto").is_file():
        raise SystemExit(f"no api.proto next to {Path(__file__).resolve()}: "
                         "run this from a source checkout or an editable install")
    return here


def generate(proto_dir: Path, out: Path) -> list[Path]:
    """Compile ``proto_dir/api.proto`` into ``out``; returns the generated files."""
    command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{VIRTUAL}={proto_dir}",
               f"--python_out={out}", f"--pyi_out={out}", f"{VIRTUAL}/api.proto"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"protoc failed ({' '.join(command)}):\n{result.stderr}")
    return [out / VIRTUAL / name for name in GENERATED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare instead of writing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    here = source_dir()
    with tempfile.TemporaryDirectory() as tmp:
        stale = []
        for new in generate(here, Path(tmp)):
            current = here / new.name
            if current.exists() and current.read_bytes() == new.read_bytes():
                continue
            stale.append(current)
            if not args.check:
                shutil.copyfile(new, current)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
