"""Builders of the data genolong trains on: downloads, genome preparation, the promoter, DeepSEA
chromatin and task datasets, whose formats :mod:`genolong.datasets` reads; only the CLI imports them."""
