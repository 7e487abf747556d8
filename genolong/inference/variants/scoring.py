"""Variant effects of a classifier: reference and alternative windows through the model, in batches.

An *effect model* has ``score_names``, ``labels`` (the P outputs it reports), ``rc`` (both strands read) and
``score(windows) -> {score name: (n, P) float32}``, which depends on nothing but its windows. The scores
follow the model's ``variant_effect`` (:data:`EFFECT_SCORES`; user guide, variants): for probabilities
``combined = |diff| * |logit_diff|`` is DeepSEA's functional-significance effect (Zhou & Troyanskaya 2015).
"""

from __future__ import annotations

import numpy as np

from genolong.classifier.scoring import average_strands
from genolong.inference.variants.tokens import SplicingTokenizer, WindowInputs
from genolong.inference.variants.windows import VariantWindows

SCORES = ("p_ref", "p_alt", "diff", "abs_diff", "logit_diff", "combined")
#: The scores of each ``variant_effect``: those of probabilities, logits and values.
EFFECT_SCORES = {"probability": SCORES, "logit": ("logit_ref", "logit_alt", "diff", "abs_diff"),
                 "value": ("ref", "alt", "diff", "abs_diff")}
#: Probabilities are clipped to [EPS, 1 - EPS] before the logit.
EPS = 1e-6


def logit(probabilities: np.ndarray) -> np.ndarray:
    """Clipped log-odds of an array of probabilities."""
    clipped = np.clip(probabilities.astype(np.float64), EPS, 1 - EPS)
    return np.log(clipped / (1 - clipped))


def rank_score(score_names) -> str:
    """The score ranking an allele's outputs (``--annotate-vcf``): ``combined``, else ``diff``, else first."""
    return next((name for name in ("combined", "diff") if name in score_names), next(iter(score_names)))


def effect_scores(ref: np.ndarray, alt: np.ndarray, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The scores ``names`` (one of :data:`EFFECT_SCORES`, module docstring) of two outputs (n, P)."""
    diff = alt - ref
    scores = {names[0]: ref, names[1]: alt, "diff": diff, "abs_diff": np.abs(diff)}
    if "combined" in names:
        logit_diff = (logit(alt) - logit(ref)).astype(np.float32)
        scores |= {"logit_diff": logit_diff, "combined": np.abs(diff) * np.abs(logit_diff)}
    return scores


class ClassifierEffects:
    """Effects of variants under a classifier on its output columns ``labels`` (P indices into C): each call
    runs the distinct inputs of its windows once, ``batch_size`` per model call (with ``rc`` both strands,
    averaged), remembering nothing across calls, so a chunk's bytes are the same on any rank."""

    def __init__(self, classifier, labels: list[int], batch_size: int, *, rc: bool = False):
        self.classifier, self.columns, self.batch_size, self.rc = classifier, np.asarray(labels), batch_size, rc
        self.effect = classifier.info.inference.variant_effect
        self.score_names = EFFECT_SCORES[self.effect]
        self.labels = [classifier.info.label_names[i] for i in labels]
        self.inputs = WindowInputs(SplicingTokenizer(classifier.tokenizer.backend_tokenizer), classifier.encode, rc)
        self.forward_passes = 0

    def _run(self, inputs: list[list[np.ndarray]]) -> np.ndarray:
        """(n, P) outputs of n inputs (each its token bodies, one per strand), in batches."""
        self.forward_passes += len(inputs)
        chunks = []
        for first in range(0, len(inputs), self.batch_size):
            batch = inputs[first : first + self.batch_size]
            rows = [strands[i] for i in range(len(batch[0])) for strands in batch]  # all forward, then all reverse
            padded = self.classifier.encode.pad(rows)
            if self.effect == "probability":  # (strands x n, C)
                outputs = self.classifier.token_outputs(padded)
            else:  # a logit or value effect compares the logits themselves
                outputs = self.classifier.token_logits(padded).float().cpu().numpy()
            chunks.append(average_strands(outputs) if len(batch[0]) > 1 else outputs)
        return np.concatenate(chunks)[:, self.columns]

    def score(self, windows: list[VariantWindows]) -> dict[str, np.ndarray]:
        """Scores of ``windows`` (n variants): name -> (n, P) float32."""
        if not windows:
            return {name: np.zeros((0, len(self.labels)), np.float32) for name in self.score_names}
        references, alternatives = self.inputs.bodies(windows)
        strands = self.inputs.strands
        ref_keys = list(dict.fromkeys(w.ref_key for w in windows))
        by_ref = dict(zip(ref_keys, self._run([[references[(k, r)] for r in strands] for k in ref_keys]), strict=True))
        alt_keys = list(dict.fromkeys((w.alt_window, w.centre) for w in windows))
        by_alt = dict(zip(alt_keys, self._run([[alternatives[(*k, r)] for r in strands] for k in alt_keys]),
                          strict=True))
        p_ref = np.stack([by_ref[w.ref_key] for w in windows])
        p_alt = np.stack([by_alt[(w.alt_window, w.centre)] for w in windows])
        scores = effect_scores(p_ref, p_alt, self.score_names)
        return {name: values.astype(np.float32) for name, values in scores.items()}
