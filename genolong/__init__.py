"""genolong: long-context DNA language models (BigBird genomics, Zaheer et al. 2020, Sec. 5).

``import genolong`` registers the genolong models with transformers' Auto classes
(``AutoConfig``, ``AutoModel``, ``AutoModelForMaskedLM``, ``AutoModelForSequenceClassification``)
without importing torch or transformers itself (see :mod:`genolong.model.auto`).
"""

from genolong.model.auto import install as _install_auto_registration

__version__ = "0.1.0"

_install_auto_registration()
