"""genolong: long-context DNA language models (BigBird genomics, Zaheer et al. 2020, Sec. 5).

``import genolong`` is light (no torch, no transformers), so that the command line starts at
once; ``import genolong.model`` (which every module that builds or loads a model imports)
registers the genolong models with transformers' Auto classes (``AutoConfig``, ``AutoModel``,
``AutoModelForMaskedLM``, ``AutoModelForSequenceClassification``; see :mod:`genolong.model`).
"""

__version__ = "0.1.0"
