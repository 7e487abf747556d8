"""The prepared chromatin dataset: DeepSEA ``.mat`` files -> memory-mapped arrays + manifest.

``genolong chromatin prepare`` runs :func:`prepare_chromatin` once, so that training and
evaluation read fixed-width arrays instead of MATLAB files:

1. decode each of ``train.mat``, ``valid.mat``, ``test.mat`` present (:mod:`.deepsea`)
   chunk by chunk into memory-mapped arrays;
2. check how the forward / reverse-complement copies are arranged;
3. with a genome, locate every input by exact match on either strand
   (:mod:`.locate`) and cut the window of ``context`` bp centred on it, as BigBird did
   (App. F.3: 8,000 bp of GRCh37 around each 1,000-bp DeepSEA input);
4. write the final arrays and ``manifest.json``.

The work resumes after an interruption (:class:`~genolong.prep.chromatin_job.ChromatinJob`).

The files of a prepared directory, and their reader: :mod:`genolong.datasets.chromatin`.

Rows whose input is not located exactly once (not found, ambiguous, too many N, too
repetitive) are either dropped (``unlocated="drop"``) or kept (``"keep"``, the default).
A kept row is stored in the centre of an N-padded row so the array stays rectangular,
and :meth:`~genolong.datasets.chromatin.ChromatinSplit.sequence` returns only its original
input: it keeps its original length instead of being padded with thousands of N that the
model never saw in pre-training. Windows that run past a chromosome end are padded with N.
"""

from __future__ import annotations

import os
from pathlib import Path

from genolong.core.errors import ConfigError, InputError, UserError

from .chromatin_job import ChromatinJob
from .deepsea import SPLITS, DeepSEAMat
from .locate import centred_flank

#: BigBird's context for the chromatin task (App. F.3).
DEFAULT_CONTEXT = 8000
UNLOCATED_POLICIES = ("keep", "drop")


def prepare_chromatin(mat_dir: str | os.PathLike, out: str | os.PathLike, *,
                      genome: str | os.PathLike | None = None, context: int | None = None,
                      unlocated: str = "keep", chunk_rows: int = 16384, probe_windows: int = 8,
                      max_candidates: int = 20_000) -> dict:
    """Convert the DeepSEA ``.mat`` files of ``mat_dir`` into a prepared directory ``out``.

    Args:
        mat_dir: directory with any of ``train.mat``, ``valid.mat``, ``test.mat``.
        out: the prepared directory to create (must not exist).
        genome: FASTA of the genome the inputs come from (GRCh37/hg19 for DeepSEA); when
            given, rows are extended to ``context`` bp around their located input.
        context: window length with a genome (default 8,000).
        unlocated: ``"keep"`` or ``"drop"`` rows whose input is not located exactly once.
        chunk_rows: rows per chunk (the unit of progress and of memory use).
        probe_windows: see :meth:`GenomeIndex.locate`.
        max_candidates: see :meth:`GenomeIndex.locate`.

    Returns:
        The manifest (also written to ``out/manifest.json``).
    """
    mat_dir, out = Path(mat_dir), Path(out)
    if unlocated not in UNLOCATED_POLICIES:
        raise ConfigError(f"unlocated must be one of {UNLOCATED_POLICIES}, got {unlocated!r}")
    if genome is None and context is not None:
        raise ConfigError("a context length needs a genome to cut the windows from (give --genome)")
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be positive, got {chunk_rows}")
    if out.exists():
        raise UserError(f"{out} already exists; remove it or choose another output directory")
    if genome is not None and not Path(genome).is_file():
        raise InputError(genome, "no such genome FASTA file")
    if not mat_dir.is_dir():
        raise InputError(mat_dir, "no such directory (expected the DeepSEA train.mat, valid.mat, test.mat)")
    found = [split for split in SPLITS if (mat_dir / f"{split}.mat").is_file()]
    if not found:
        raise InputError(mat_dir, "no train.mat, valid.mat or test.mat found (unpack deepsea_train_bundle)")
    mats: dict[str, DeepSEAMat] = {}
    try:
        for split in found:
            mats[split] = DeepSEAMat(mat_dir / f"{split}.mat", split)
        lengths = {mat.length for mat in mats.values()}
        if len(lengths) != 1:
            raise InputError(mat_dir, f"the .mat files hold sequences of different lengths {sorted(lengths)}")
        length = lengths.pop()
        if context is not None and (genome is None or context < 1):
            raise UserError(f"context={context} needs a genome and must be a positive number of bp", hint="pass "
                            "--genome with --context, or leave out --context")
        context = (DEFAULT_CONTEXT if context is None else context) if genome is not None else length
        centred_flank(context, length)
        options = {"context": context, "unlocated": unlocated if genome else None,
                   "probe_windows": probe_windows, "max_candidates": max_candidates}
        job = ChromatinJob(out, mats, Path(genome) if genome else None, options, chunk_rows)
        return job.run()
    finally:
        for mat in mats.values():
            mat.close()

