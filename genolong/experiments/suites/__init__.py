"""Benchmark suites: tasks in the layouts users download, run over models, fine-tuning modes and
seeds, reported with confidence intervals, the k-mer baseline and the leakage between splits
(``genolong benchmark``; the checks of ``genolong bench`` are :mod:`genolong.experiments.bench`)."""
