"""Benchmarks: attention kernels, converted models, memory, CPU precision."""
