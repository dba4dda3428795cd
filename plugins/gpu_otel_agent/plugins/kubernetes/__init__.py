"""Kubernetes: pod names and device allocations from the kubelet's pod-resources API."""
