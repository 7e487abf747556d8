"""genolong: long-context DNA language models (BigBird genomics, Zaheer et al. 2020, Sec. 5).

``import genolong`` is light (no torch, no transformers), so that the command line starts at
once; ``import genolong.model`` (which every module that builds or loads a model imports)
registers the genolong models with transformers' Auto classes (``AutoConfig``, ``AutoModel``,
``AutoModelForMaskedLM``, ``AutoModelForSequenceClassification``; see :mod:`genolong.model`).

A process whose working directory was deleted cannot import transformers (it resolves a relative
path at import): the process then runs from ``/`` and :data:`WORKING_DIRECTORY_GONE` is True, for
the CLI to stop with one line.
"""

import os

try:
    os.getcwd()
    WORKING_DIRECTORY_GONE = False
except FileNotFoundError:
    WORKING_DIRECTORY_GONE = True
    os.chdir("/")

__version__ = "0.1.0"
