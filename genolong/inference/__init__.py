"""Inference at genome scale: window plans, batched scoring through Lightning's predict loop,
and tracks (bigWig, bedGraph, HDF5, BED) written from per-chromosome parts.

* :mod:`~genolong.inference.plan`: what to scan (chromosomes, BED regions) cut into position
  bins, the window scored for each bin, and fixed batches of bins.
* :mod:`~genolong.inference.windows`: a batch of bins -> token ids (genome read by random
  access, N-rich windows skipped, per-base tokenizers vectorised).
* :mod:`~genolong.inference.loop`: the Lightning predict loop (one process or many ranks).
* :mod:`~genolong.inference.parts`: per-rank, per-chromosome score files; merge and resume.
* :mod:`~genolong.inference.tracks`: the writers.
* :mod:`~genolong.inference.scan`: ``genolong scan`` end to end.
"""
