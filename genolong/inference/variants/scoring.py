"""Variant effects of a classifier: reference and alternative windows through the model, in batches.

An *effect model* has ``score_names``, ``labels`` (the P outputs it reports) and
``score(windows) -> {score name: (n, P) float32}`` for a list of
:class:`~genolong.inference.variants.windows.VariantWindows`. :class:`ClassifierEffects` is the
one for fine-tuned classifiers; :class:`~genolong.inference.variants.mlm_llr.MaskedLMEffects` the zero-shot
one. The predict loop (:mod:`~genolong.inference.variants.loop`) calls ``score`` on chunks of
windows, on whichever rank; a chunk's scores depend on nothing but the chunk.

What is compared follows the model's inference spec (``variant_effect``,
:class:`~genolong.classifier.task_info.InferenceSpec`). For ``probability`` (sigmoid outputs, and
each class of a softmax), scores per variant x output, with probabilities ``p_ref``, ``p_alt``
(averaged over both strands with ``--rc``) and ``logit(p) = log(p / (1 - p))`` of ``p`` clipped to
``[1e-6, 1 - 1e-6]``:

* ``p_ref``, ``p_alt``: the probabilities;
* ``diff = p_alt - p_ref`` and ``abs_diff``;
* ``logit_diff = logit(p_alt) - logit(p_ref)``;
* ``combined = |diff| * |logit_diff|``, DeepSEA's functional-significance effect
  (Zhou & Troyanskaya 2015, Methods: "the product of the absolute difference and the absolute
  log odds difference").

For ``value`` (regression outputs) the scores are ``ref``, ``alt`` (the values), ``diff = alt - ref``
and ``abs_diff``; for ``logit``, ``logit_ref``, ``logit_alt`` (the model's logits, before the
activation), ``diff`` and ``abs_diff``.
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
    """The score that ranks the outputs of an allele (``--annotate-vcf``): ``combined``, else ``diff``,
    else the first."""
    return next((name for name in ("combined", "diff") if name in score_names), next(iter(score_names)))


def difference_scores(ref: np.ndarray, alt: np.ndarray, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``names`` (the reference's, the alternative's, ``diff``, ``abs_diff``) of two outputs (n, P)."""
    diff = alt - ref
    return dict(zip(names, (ref, alt, diff, np.abs(diff)), strict=True))


def effect_scores(p_ref: np.ndarray, p_alt: np.ndarray) -> dict[str, np.ndarray]:
    """The six scores of the module docstring; inputs and outputs (n, P)."""
    diff = p_alt - p_ref
    logit_diff = (logit(p_alt) - logit(p_ref)).astype(np.float32)
    return {"p_ref": p_ref, "p_alt": p_alt, "diff": diff, "abs_diff": np.abs(diff), "logit_diff": logit_diff,
            "combined": np.abs(diff) * np.abs(logit_diff)}


class ClassifierEffects:
    """Effects of variants under a classifier.

    Each call runs the distinct inputs of its windows: variants that share a reference
    window (the alleles of one site) share its forward pass. Token ids come from
    :class:`~genolong.inference.variants.tokens.WindowInputs` (each reference window tokenised
    once, a substitution's alternative spliced into its tokens: the ids of tokenising each
    window whole). With ``rc`` both strands of an input go through the model in one call and
    their probabilities are averaged, as :class:`~genolong.classifier.directory.StrandAveraged`
    does. Nothing is remembered across calls, so a chunk's model batches, and thus its bytes,
    are the same on any rank.

    Args:
        classifier: a :class:`~genolong.classifier.directory.Classifier` loaded by
            :func:`genolong.tasks.task.load_classifier` (its ``info.inference.variant_effect``
            chooses the scores).
        labels: the output columns to report (P indices into C).
        batch_size: inputs per model call (each one or, with ``rc``, two rows).
        rc: average the probabilities of both strands.
    """

    def __init__(self, classifier, labels: list[int], batch_size: int, *, rc: bool = False):
        self.classifier, self.columns, self.batch_size = classifier, np.asarray(labels), batch_size
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
        scores = (effect_scores(p_ref, p_alt) if self.effect == "probability"
                  else difference_scores(p_ref, p_alt, self.score_names))
        return {name: values.astype(np.float32) for name, values in scores.items()}
