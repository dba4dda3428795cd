"""Compile the BPF programs once, when the package is built.

Run as ``python -m gpu_otel_agent.plugins.ebpf.compile_bpf`` (into the installed package) or as
``python plugins/gpu_otel_agent/plugins/ebpf/compile_bpf.py`` from a source tree (the image build
does, before installing): this module imports nothing but the standard library.

CO-RE: ``vmlinux.h`` is generated from the build machine's kernel BTF and the object carries
BTF relocations, so libbpf fits it to whatever kernel the agent later runs on; no compiler is
needed at run time. Needs clang, bpftool and the libbpf headers (Debian: clang, bpftool,
libbpf-dev); CI and the container image run this step.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE_DIR = Path(__file__).parent / "bpf"
SOURCE = SOURCE_DIR / "cuda_activity.bpf.c"
OBJECT = SOURCE_DIR / "cuda_activity.bpf.o"
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
# clang's names for the architectures whose pt_regs bpf_tracing.h knows
TARGET_ARCH = {"x86_64": "x86", "aarch64": "arm64", "ppc64le": "powerpc", "s390x": "s390",
               "riscv64": "riscv"}


class BuildError(RuntimeError):
    """The BPF object cannot be built here; the message says what is missing."""


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"{name} not found (Debian package {package})")
    return path


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(argv[:2])} failed:\n{done.stderr.strip()}")


def build(output: Path = OBJECT, btf: Path = KERNEL_BTF) -> Path:
    clang = _tool("clang", "clang")
    bpftool = _tool("bpftool", "bpftool")
    arch = TARGET_ARCH.get(platform.machine())
    if arch is None:
        raise BuildError(f"no BPF target for architecture {platform.machine()}")
    if not btf.exists():
        raise BuildError(f"{btf} missing: the kernel was built without BTF "
                         "(CONFIG_DEBUG_INFO_BTF)")
    if not Path("/usr/include/bpf/bpf_helpers.h").exists():
        raise BuildError("libbpf headers not found (Debian package libbpf-dev)")
    with tempfile.TemporaryDirectory(prefix="gpu-agent-bpf-") as scratch:
        header = Path(scratch) / "vmlinux.h"
        dumped = subprocess.run([bpftool, "btf", "dump", "file", str(btf), "format", "c"],
                                capture_output=True, check=False)
        if dumped.returncode != 0:
            raise BuildError(f"bpftool btf dump failed: {dumped.stderr.decode().strip()}")
        header.write_bytes(dumped.stdout)
        partial = Path(scratch) / output.name
        _run([clang, "-O2", "-g", "-target", "bpf", "-mcpu=v3", f"-D__TARGET_ARCH_{arch}",
              "-Wall", "-Werror", "-I", scratch, "-I", str(SOURCE_DIR),
              "-c", str(SOURCE), "-o", str(partial)])
        strip = shutil.which("llvm-strip")
        if strip is not None:  # DWARF is for debuggers; the BTF that CO-RE needs stays
            _run([strip, "-g", str(partial)])
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(partial, output)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OBJECT)
    args = parser.parse_args(argv)
    try:
        path = build(args.output)
    except BuildError as error:
        print(f"BPF build failed: {error}", file=sys.stderr)
        return 1
    print(f"built {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
