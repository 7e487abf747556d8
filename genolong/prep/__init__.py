"""Builders of the data genolong trains on (installed as ``genolong.prep``): downloads
(:mod:`.transfer`, :mod:`.integrity`, :mod:`.cache`, :mod:`.sources`), genome preparation,
the promoter and DeepSEA chromatin datasets. They use genolong; of genolong, only the
commands import them, and the formats they write are read by :mod:`genolong.datasets`."""
