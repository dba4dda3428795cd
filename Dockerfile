# syntax=docker/dockerfile:1
# gpu-otel-agent image: build the package in one stage, run it from a slim one.
#   docker build -t gpu-otel-agent .
# The NVIDIA container toolkit injects the driver's NVML library at run time (the chart sets
# NVIDIA_DRIVER_CAPABILITIES=utility); the image carries no GPU driver of its own.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# clang, bpftool and the libbpf headers compile the eBPF plugin's CO-RE object here, once; the
# runtime stage needs none of them.
RUN apt-get update \
    && apt-get install -y --no-install-recommends clang llvm bpftool libbpf-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/gpu-otel-agent
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY plugins ./plugins
# The object is package data (plugins/gpu_otel_agent/plugins/ebpf/bpf/*.bpf.o): build it in the source tree before
# installing (compile_bpf.py needs nothing but the standard library), and fail the image when it did
# not make it into the package.
RUN python plugins/gpu_otel_agent/plugins/ebpf/compile_bpf.py \
    && /opt/gpu-otel-agent/bin/pip install . \
    && /opt/gpu-otel-agent/bin/python -c \
        "from gpu_otel_agent.plugins.ebpf.compile_bpf import OBJECT; assert OBJECT.is_file(), OBJECT" \
    && /opt/gpu-otel-agent/bin/python -m compileall -q /opt/gpu-otel-agent

FROM python:${PYTHON_VERSION}-slim-bookworm
# libbpf for the eBPF plugin (loaded through ctypes; no compiler at run time).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libbpf1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/gpu-otel-agent /opt/gpu-otel-agent
ENV PATH=/opt/gpu-otel-agent/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Non-root by default. The Helm chart runs it as uid 0 with every capability dropped, since
# the kubelet's pod-resources socket is root-only; elsewhere nobody is enough.
USER 65534:65534
EXPOSE 9400
ENTRYPOINT ["gpu-agent"]
CMD ["run"]
