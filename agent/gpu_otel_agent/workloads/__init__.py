"""Who uses the GPU: PID -> cgroup -> container / pod / batch job, kept current by events."""
