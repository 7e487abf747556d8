"""The prepared chromatin dataset (read by :mod:`genolong.datasets.chromatin`): DeepSEA ``.mat`` files
decoded into arrays, resumably; with a genome, the ``context``-bp window around each located input
(BigBird App. F.3), N past chromosome ends.
Rows not located exactly once are dropped (``unlocated="drop"``) or kept (the default) in the centre
of an N-padded row, from which :meth:`~genolong.datasets.chromatin.ChromatinSplit.sequence` returns
only the original input (the model never saw thousands of N in pre-training).
"""

from __future__ import annotations

import contextlib
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
    """Convert any of ``train.mat``, ``valid.mat``, ``test.mat`` in ``mat_dir`` into the new directory
    ``out``; returns the manifest. With the ``genome`` the inputs come from (GRCh37 for DeepSEA), rows
    are extended to ``context`` bp (default 8,000) around their input, located by
    :meth:`~genolong.prep.locate.GenomeIndex.locate`. ``chunk_rows``: the unit of progress and memory use."""
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
    with contextlib.ExitStack() as stack:
        mats = {split: stack.enter_context(DeepSEAMat(mat_dir / f"{split}.mat", split)) for split in found}
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
        return ChromatinJob(out, mats, Path(genome) if genome else None, options, chunk_rows).run()

