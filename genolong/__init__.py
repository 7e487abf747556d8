"""genolong: long-context DNA language models (BigBird genomics, Zaheer et al. 2020, Sec. 5)."""

__version__ = "0.1.0"
