"""``genolong benchmark``: suites of tasks run over models, fine-tuning modes and seeds, reported with
intervals, the k-mer baseline and the leakage between splits."""
