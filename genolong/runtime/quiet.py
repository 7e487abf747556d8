"""Lightning's console quieted for every command that runs it: its INFO lines and the warnings that do
not concern a genolong run."""

from __future__ import annotations

import logging
import warnings

#: Lightning and torch warnings that say nothing to a genolong user (regular expressions).
QUIET_WARNINGS = (
    r"You're resuming from a checkpoint that ended before the epoch ended",  # genolong resumes mid epoch exactly
    r"Checkpoint directory .* exists and is not empty",  # a resumed run's own checkpoints
    r"The dirpath has changed from",  # a periodic checkpoint copied over last.ckpt
    r"The number of training batches \(\d+\) is smaller than the logging interval",  # a smoke run
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # Lightning on a newer torch
)


def quiet_lightning() -> None:
    """Lightning's INFO lines and :data:`QUIET_WARNINGS` off, unless genolong logs at DEBUG level (``-v``)."""
    verbose = logging.getLogger("genolong").isEnabledFor(logging.DEBUG)
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    if not verbose:
        for pattern in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
