"""Running trained models on DNA, one subpackage per command family: :mod:`~genolong.inference.predict`
(``predict-promoter``, ``chromatin predict``, ``task predict``), :mod:`~genolong.inference.scan`,
:mod:`~genolong.inference.variants` (``score-variants``), :mod:`~genolong.inference.explain` and
:mod:`~genolong.inference.embed`, on shared pieces: :mod:`~genolong.inference.loop` (the predict loop on
one process or many ranks), :mod:`~genolong.inference.labels`, :mod:`~genolong.inference.bed` and
:mod:`~genolong.inference.called`.
"""
