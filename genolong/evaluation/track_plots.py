"""A figure of predicted against measured coverage over one window, a panel per track."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from genolong.core.files import atomic_path


def plot_tracks(measured: np.ndarray, predicted: dict[str, np.ndarray] | np.ndarray, *, tracks: Sequence[int],
                names: Sequence[str], region: tuple[str, int, int], bin_bp: int, target_offset_bp: int,
                png: str | os.PathLike | None = None):
    """Measured coverage of the chosen ``tracks`` (filled) with each prediction over it (lines), against
    genome position, one panel per track; written as a PNG when ``png`` is given (atomically). Returns the
    matplotlib figure (Agg backend).

    Args:
        measured: ``(bins, T)`` measured values of one window.
        predicted: ``(bins, T)``, or ``{label: (bins, T)}`` for several predictions (a model, a baseline).
        tracks: the column indices to show; ``names``: every track's name (``T``).
        region: the window's ``(contig, start, end)``; bins start ``target_offset_bp`` after ``start``.
        bin_bp: bin size in bp.
    """
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    predictions = predicted if isinstance(predicted, dict) else {"predicted": predicted}
    contig, start, _ = region
    positions = start + target_offset_bp + (np.arange(len(measured)) + 0.5) * bin_bp
    fig, axes = plt.subplots(len(tracks), 1, figsize=(10, 1.6 * len(tracks) + 0.6), sharex=True, squeeze=False)
    for ax, track in zip(axes[:, 0], tracks, strict=True):
        ax.fill_between(positions, measured[:, track], step="mid", color="0.7", label="measured")
        for label, values in predictions.items():
            ax.plot(positions, values[:, track], lw=0.9, label=label)
        ax.set_ylabel(names[track][:24], fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7, loc="upper right", ncol=1 + len(predictions))
    axes[-1, 0].set_xlabel(f"{contig} position (bp)")
    fig.tight_layout()
    if png is not None:
        with atomic_path(Path(png)) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    return fig
