"""Benchmarks: attention kernels, converted models, device checks; the bf16 probe and memory
high-water marks they use are core modules (:mod:`genolong.runtime.cpu_bf16`, :mod:`genolong.core.memory`)."""
