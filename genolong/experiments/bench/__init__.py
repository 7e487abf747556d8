"""The checks of ``genolong bench``: attention speed and memory, converted models, device checks.
Not the suites of ``genolong benchmark`` (:mod:`genolong.experiments.suites`) nor ``benchmarks/``."""
