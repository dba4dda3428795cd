"""The pod-resources messages are Kubernetes' own: vendored proto, generated code, runtime pin.

The vendored ``api.proto`` must be the upstream file byte for byte (its git blob id, recorded in
its header, is recomputed here); the committed ``api_pb2`` must be what protoc makes of it now
(compiled here to a descriptor set and compared field by field, numbers included); and the
``protobuf`` requirement must admit the runtime the generated code demands.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from google.protobuf import descriptor_pb2
from packaging.requirements import Requirement
from packaging.version import Version

from gpu_otel_agent.plugins.kubernetes import api, api_pb2, regenerate

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "plugins/gpu_otel_agent/plugins/kubernetes"
SEPARATOR = "// " + "-" * 93 + "\n"


def _upstream_text() -> tuple[str, str]:
    """(recorded blob id, the text below the vendoring header)."""
    text = (FOLDER / "api.proto").read_text()
    header, found, body = text.partition(SEPARATOR)
    assert found, "the vendoring header must end with the line of dashes"
    match = re.search(r"git blob ([0-9a-f]{40})", header)
    assert match, "the header must record the upstream git blob id"
    return match.group(1), body


def test_vendored_proto_is_the_upstream_file() -> None:
    blob, body = _upstream_text()
    data = body.encode()
    # How git names a file's content: sha1 over "blob <size>\0" and the bytes.
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob


def test_generated_code_matches_the_vendored_proto(tmp_path: Path) -> None:
    out = tmp_path / "api.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{FOLDER}",
                    f"--descriptor_set_out={out}", "api.proto"], check=True)
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    generated = descriptor_pb2.FileDescriptorProto()
    api_pb2.DESCRIPTOR.CopyToProto(generated)
    assert generated.name == "gpu_otel_agent/plugins/kubernetes/api.proto"  # see regenerate
    compiled.name = generated.name
    for message in compiled.message_type:  # protoc fills json_name; CopyToProto leaves it out
        for field in message.field:
            field.ClearField("json_name")
    # Whole descriptors: every message, field name, number, type, label and the service.
    assert generated == compiled
    numbers = {f.name: f.number for f in compiled.message_type[4].field}  # PodResources
    assert compiled.message_type[4].name == "PodResources"
    assert numbers == {"name": 1, "namespace": 2, "containers": 3}


def test_field_numbers_read_from_the_proto_text() -> None:
    """A third reading, without protoc: each message's ``name = number;`` lines."""
    _, body = _upstream_text()
    code = "\n".join(line.split("//")[0] for line in body.splitlines())
    from_text = {
        name: dict((field, int(number)) for field, number in
                   re.findall(r"(\w+)\s*=\s*(\d+)\s*;", fields))
        for name, fields in re.findall(r"message\s+(\w+)\s*\{([^{}]*)\}", code)
    }
    from_code = {m.name: {f.name: f.number for f in m.fields}
                 for m in api_pb2.DESCRIPTOR.message_types_by_name.values()}
    assert from_text == from_code
    assert from_code["ContainerDevices"] == {"resource_name": 1, "device_ids": 2, "topology": 3}


def test_committed_files_are_what_regenerate_makes() -> None:
    assert regenerate.main(["--check"]) == 0


def test_method_paths_come_from_the_descriptor() -> None:
    assert (api.LIST, api.GET, api.ALLOCATABLE) == (
        "/v1.PodResourcesLister/List", "/v1.PodResourcesLister/Get",
        "/v1.PodResourcesLister/GetAllocatableResources")


def test_protobuf_requirement_admits_the_generated_code() -> None:
    source = (FOLDER / "api_pb2.py").read_text()
    match = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,"
                      r"\s*(\d+),\s*(\d+),\s*(\d+),", source)
    assert match, "generated code without a runtime version check: review the pin by hand"
    major, minor, patch = map(int, match.groups())
    gencode = Version(f"{major}.{minor}.{patch}")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "protobuf"]
    # The runtime refuses gencode newer than itself or of another major version.
    assert gencode in spec.specifier
    assert Version(f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.99") \
        not in spec.specifier
    assert Version(f"{major + 1}.0.0") not in spec.specifier
