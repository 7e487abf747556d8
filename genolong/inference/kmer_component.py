"""The k-mer component of a classifier directory: a k-mer logistic regression added to the network.

A classifier directory may hold ``kmer_component.npz`` next to the network. Its logit is added
to the network's, so the directory scores ``sigmoid(network logit + k-mer logit)``: an ensemble
in logit space whose weights (the network's, the k-mer models' and an offset) were fitted
together by logistic regression on held-out data and folded in (the network's into its output
layer, the k-mer models' into these weights; :mod:`genolong.evaluation.kmer_ensemble`).

A k-mer model is the baseline's (:mod:`genolong.evaluation.kmer_baseline`): the overlapping
k-mers of a sequence are counted, the counts of k-mers seen in training are divided by their
sum (L1) and by their training standard deviation, and dotted with the logistic regression's
coefficients. The last two steps are linear, so the component keeps one weight per k-mer::

    logit = sum_j count_j * weight_j / sum_j count_j + bias,   j over the training k-mers

and a weighted sum of k-mer models that count the same k-mers is one such component
(:meth:`KmerComponent.from_pipelines`).

It reads the bases the network reads: the text of a token row (the kept tokens of an input;
special tokens read as ``N``), so every path that scores token rows (``predict-*``, ``eval``,
``scan``) scores the same ensemble, both strands and every window alike. k-mers with a base
other than ACGT are not counted (training sequences hold none).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from genolong.errors import InputError, UserError

COMPONENT_FILE = "kmer_component.npz"
_CODES = np.full(256, 4, dtype=np.int64)
_CODES[np.frombuffer(b"ACGT", dtype=np.uint8)] = np.arange(4)


def kmer_index(kmer: str) -> int:
    """The base-4 index of an ACGT k-mer (A=0, C=1, G=2, T=3; first base most significant)."""
    index = 0
    for base in kmer:
        index = 4 * index + "ACGT".index(base)
    return index


class KmerComponent:
    """One weight per training k-mer, and a bias; see the module docstring for the logit.

    Args:
        kmers: the training k-mers (V,), ACGT only, any lengths from 1 to 8.
        weights: shape (V,), the weight of each k-mer.
        bias: added to every logit.
    """

    def __init__(self, kmers: Sequence[str], weights: np.ndarray, bias: float):
        weights = np.asarray(weights, dtype=np.float64).ravel()
        if len(kmers) != len(weights) or not len(kmers):
            raise UserError(f"a k-mer component needs one weight per k-mer: {len(kmers)} k-mers, {len(weights)} weights")
        if any(not 1 <= len(k) <= 8 or set(k) - set("ACGT") for k in kmers):
            raise UserError("a k-mer component holds ACGT k-mers of 1 to 8 bases")
        self.kmers, self.weights, self.bias = list(kmers), weights, float(bias)
        self.tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # k -> (weight, seen) by k-mer index
        for kmer, weight in zip(self.kmers, weights, strict=True):
            table, seen = self.tables.setdefault(len(kmer), (np.zeros(4 ** len(kmer)), np.zeros(4 ** len(kmer))))
            table[kmer_index(kmer)], seen[kmer_index(kmer)] = weight, 1.0
        self.token_texts: np.ndarray | None = None

    @classmethod
    def from_pipeline(cls, pipeline, scale: float = 1.0, offset: float = 0.0) -> KmerComponent:
        """The component of a fitted baseline pipeline (``kmer_features`` + ``logistic``), its logit
        times ``scale`` plus ``offset``."""
        return cls.from_pipelines([(pipeline, scale)], offset)

    @classmethod
    def from_pipelines(cls, weighted: Sequence[tuple[object, float]], offset: float = 0.0) -> KmerComponent:
        """One component whose logit is ``sum(weight * pipeline logit) + offset`` over ``(pipeline, weight)``.

        The logits of pipelines that count the same k-mers (fitted on one vocabulary) are linear
        in the same frequencies, so their weighted sum is one k-mer model.

        Raises:
            ValueError: no pipeline, or pipelines that count different k-mers.
        """
        kmers, weights, bias = None, 0.0, float(offset)
        for pipeline, weight in weighted:
            vocabulary = pipeline.named_steps["kmer_counts"].vocabulary_
            counted = sorted(vocabulary, key=vocabulary.get)
            if kmers is not None and counted != kmers:
                raise ValueError("k-mer pipelines to add up must count the same k-mers (fit them on one vocabulary)")
            logistic = pipeline.named_steps["logistic"]
            kmers = counted
            weights = weights + weight * logistic.coef_[0] / pipeline.named_steps["scale"].scale_
            bias += weight * float(logistic.intercept_[0])
        if kmers is None:
            raise ValueError("a k-mer component needs at least one pipeline")
        return cls(kmers, weights, bias)

    def logits(self, sequences: Sequence[str]) -> np.ndarray:
        """The k-mer logit of each sequence (uppercase; other letters than ACGT break k-mers), shape (B,) float64.

        A sequence without any training k-mer gets the bias. The batch is scored as one string,
        its sequences joined by ``N`` (no k-mer spans two of them).
        """
        joined = "N".join(sequences) + "N"
        codes = _CODES[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)]  # (L,)
        owner = np.repeat(np.arange(len(sequences)), [len(s) + 1 for s in sequences])  # (L,) sequence of each base
        broken = np.concatenate([[0], np.cumsum(codes == 4)])  # non-ACGT bases before each position
        total, count = np.zeros(len(sequences)), np.zeros(len(sequences))
        for k, (table, seen) in self.tables.items():
            n = len(codes) - k + 1
            if n < 1:
                continue
            starts = np.flatnonzero(broken[k : k + n] == broken[:n])  # windows of ACGT only
            index = np.zeros(len(starts), dtype=np.int64)
            for offset in range(k):
                index = 4 * index + codes[starts + offset]
            total += np.bincount(owner[starts], weights=table[index], minlength=len(sequences))
            count += np.bincount(owner[starts], weights=seen[index], minlength=len(sequences))
        return self.bias + np.divide(total, count, out=np.zeros_like(total), where=count > 0)

    def bind(self, tokenizer) -> KmerComponent:
        """Read token rows of ``tokenizer`` (see :meth:`token_logits`); returns self."""
        vocabulary = tokenizer.get_vocab()
        texts = np.full(max(vocabulary.values()) + 1, "N", dtype=object)  # N: no k-mer spans it
        for token, index in vocabulary.items():
            texts[index] = token
        texts[list(tokenizer.all_special_ids)] = "N"
        self.token_texts = texts
        return self

    def token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The k-mer logit of the bases of each token row, (B, T) ids -> (B,) float32 on their device."""
        if self.token_texts is None:
            raise UserError("a k-mer component reads token rows once bound to a tokenizer (bind)")
        rows = input_ids.cpu().numpy()
        sequences = ["".join(self.token_texts[row]) for row in rows]
        return torch.from_numpy(self.logits(sequences)).float().to(input_ids.device)

    def save(self, directory: str | Path) -> None:
        np.savez(Path(directory) / COMPONENT_FILE, kmers=np.array(self.kmers), weights=self.weights, bias=self.bias)

    @classmethod
    def load(cls, directory: str | Path, tokenizer) -> KmerComponent | None:
        """The component of a classifier directory, bound to its tokenizer; None when it has none.

        Raises:
            InputError: the file is not a k-mer component.
        """
        path = Path(directory) / COMPONENT_FILE
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                component = cls([str(k) for k in data["kmers"]], data["weights"], float(data["bias"]))
        except (OSError, ValueError, KeyError, TypeError, UserError) as err:
            raise InputError(path, f"not a k-mer component: {err}") from None
        return component.bind(tokenizer)
