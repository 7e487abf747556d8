"""Experiments over models: every backbone under one budget (``compare``), length extrapolation
(``extrapolate``), acceptance and speed checks (``bench/``, ``genolong bench``) and benchmark
suites (``suites/``, ``genolong benchmark``)."""
