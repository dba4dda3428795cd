"""A stand-in CUDA runtime and driver (C) and a workload program that calls them, for the
eBPF CUDA tracer's tests: no GPU needed, only a C compiler.

    from tests.cuda_standin.driver import CudaWorkload

    with CudaWorkload(cgroup=pod.cgroup) as w:   # build_standin() on first use, cached
        w.launch(1000)                           # 1000 cudaLaunchKernel -> cuLaunchKernel
        ident = w.malloc(1 << 20)
        w.sync("stream", n=3, delay_ns=2_000_000)
        w.free(ident)
"""
