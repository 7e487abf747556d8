"""Small data files shipped with the package (see each folder's README for provenance)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def sample_genome() -> Path:
    """The shipped real human sample genome (hg19 chr17 fragment + chrM, 56,569 bp)."""
    return Path(str(resources.files(__name__) / "genomes" / "sample_hg19.fa"))
