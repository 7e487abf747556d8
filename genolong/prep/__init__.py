"""Builders of the data genolong trains on: downloads (:mod:`.transfer`, :mod:`.integrity`,
:mod:`.cache`, :mod:`.sources`), genome preparation, the promoter, DeepSEA chromatin and task
datasets. Of genolong, only the command line imports them, and the formats they write are read
by :mod:`genolong.datasets`."""
