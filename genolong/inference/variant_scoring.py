"""Variant effects of a classifier: reference and alternative windows through the model, in batches.

An *effect model* has ``score_names``, ``labels`` (the P outputs it reports) and
``score(windows) -> {score name: (n, P) float32}`` for a list of
:class:`~genolong.inference.variant_windows.VariantWindows`. :class:`ClassifierEffects` is the
one for fine-tuned classifiers; :class:`~genolong.inference.mlm_llr.MaskedLMEffects` the zero-shot
one. The predict loop (:mod:`~genolong.inference.variant_loop`) calls ``score`` on chunks of
windows, on whichever rank; a chunk's scores depend on nothing but the chunk.

Scores per variant x output, with probabilities ``p_ref``, ``p_alt`` (averaged over both
strands with ``--rc``) and ``logit(p) = log(p / (1 - p))`` of ``p`` clipped to
``[1e-6, 1 - 1e-6]``:

* ``p_ref``, ``p_alt``: the probabilities;
* ``diff = p_alt - p_ref`` and ``abs_diff``;
* ``logit_diff = logit(p_alt) - logit(p_ref)``;
* ``combined = |diff| * |logit_diff|``, DeepSEA's functional-significance effect
  (Zhou & Troyanskaya 2015, Methods: "the product of the absolute difference and the absolute
  log odds difference").
"""

from __future__ import annotations

import numpy as np

from genolong.inference.variant_windows import VariantWindows

SCORES = ("p_ref", "p_alt", "diff", "abs_diff", "logit_diff", "combined")
#: Probabilities are clipped to [EPS, 1 - EPS] before the logit.
EPS = 1e-6


def logit(probabilities: np.ndarray) -> np.ndarray:
    """Clipped log-odds of an array of probabilities."""
    clipped = np.clip(probabilities.astype(np.float64), EPS, 1 - EPS)
    return np.log(clipped / (1 - clipped))


def effect_scores(p_ref: np.ndarray, p_alt: np.ndarray) -> dict[str, np.ndarray]:
    """The six scores of the module docstring; inputs and outputs (n, P)."""
    diff = p_alt - p_ref
    logit_diff = (logit(p_alt) - logit(p_ref)).astype(np.float32)
    return {
        "p_ref": p_ref,
        "p_alt": p_alt,
        "diff": diff,
        "abs_diff": np.abs(diff),
        "logit_diff": logit_diff,
        "combined": np.abs(diff) * np.abs(logit_diff),
    }


class ClassifierEffects:
    """Effects of variants under a classifier.

    Each call runs the unique sequences of its windows: variants that share a reference
    window (the alleles of one site) share its forward pass. Nothing is remembered across
    calls, so a chunk's model batches, and thus its bytes, are the same on any rank.

    Args:
        scorer: ``probabilities(sequences, centres) -> (B, C)`` and ``info`` (a
            :class:`~genolong.inference.classifier.Classifier`, or :class:`~genolong.inference.classifier.StrandAveraged`).
        labels: the output columns to report (P indices into C).
        batch_size: sequences per model call.
    """

    score_names = SCORES

    def __init__(self, scorer, labels: list[int], batch_size: int):
        self.scorer, self.columns, self.batch_size = scorer, np.asarray(labels), batch_size
        self.labels = [scorer.info.label_names[i] for i in labels]
        self.forward_passes = 0

    def _reference(self, windows: list[VariantWindows]) -> np.ndarray:
        """(n, P) reference probabilities, one forward pass per distinct reference window."""
        unique = {w.ref_key: (w.ref_window, w.centre) for w in windows}
        by_key = dict(zip(unique, self._run(list(unique.values())), strict=True))
        return np.stack([by_key[w.ref_key] for w in windows])

    def _run(self, inputs: list[tuple[str, int | None]]) -> np.ndarray:
        """(n, P) probabilities of distinct ``(sequence, centre)`` inputs, in batches."""
        self.forward_passes += len(inputs)
        chunks = []
        for first in range(0, len(inputs), self.batch_size):
            sequences, centres = zip(*inputs[first : first + self.batch_size], strict=True)
            centres = None if all(c is None for c in centres) else list(centres)
            chunks.append(self.scorer.probabilities(list(sequences), centres))
        return np.concatenate(chunks)[:, self.columns]

    def score(self, windows: list[VariantWindows]) -> dict[str, np.ndarray]:
        """Scores of ``windows`` (n variants): name -> (n, P) float32."""
        if not windows:
            return {name: np.zeros((0, len(self.labels)), np.float32) for name in SCORES}
        p_ref = self._reference(windows)
        unique = list(dict.fromkeys((w.alt_window, w.centre) for w in windows))
        by_input = dict(zip(unique, self._run(unique), strict=True))
        p_alt = np.stack([by_input[(w.alt_window, w.centre)] for w in windows])
        return {name: values.astype(np.float32) for name, values in effect_scores(p_ref, p_alt).items()}
