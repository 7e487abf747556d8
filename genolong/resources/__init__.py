"""Small data files shipped with the package (see each folder's README for provenance)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def sample_genome() -> Path:
    """The shipped real human sample genome (hg19 chr17 fragment + chrM, 56,569 bp)."""
    return Path(str(resources.files(__name__) / "genomes" / "sample_hg19.fa"))


def promoter_model() -> Path:
    """The promoter classifier shipped with the package (``--model default``; its README gives its data)."""
    return Path(str(resources.files(__name__) / "models" / "promoter"))
