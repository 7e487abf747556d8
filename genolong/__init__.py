"""genolong: long-context DNA language models (BigBird genomics, Zaheer et al. 2020, Sec. 5).

``import genolong`` registers the genolong models with transformers' Auto classes
(``AutoConfig``, ``AutoModel``, ``AutoModelForMaskedLM``, ``AutoModelForSequenceClassification``;
see :mod:`genolong.model`).
"""

import genolong.model  # noqa: F401  (the Auto-class registration)

__version__ = "0.1.0"
