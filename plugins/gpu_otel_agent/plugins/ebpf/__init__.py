"""Per-process CUDA activity from eBPF uprobes, and process lifecycle from tracepoints."""
