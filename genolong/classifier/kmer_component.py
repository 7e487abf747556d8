"""The k-mer component of a classifier directory: k-mer logistic regressions added to the network.

A classifier directory may hold ``kmer_component.npz`` next to the network. Its logit is added
to the network's, so the directory scores ``sigmoid(network logit + k-mer logit)``: an ensemble
in logit space whose weights (the network's, the k-mer models' and an offset) were fitted
together by logistic regression on held-out data and folded in (the network's into its output
layer, the k-mer models' here; :mod:`genolong.evaluation.kmer_ensemble`).

A k-mer model is the baseline's (:mod:`genolong.evaluation.kmer_baseline`): the overlapping
k-mers of a sequence are counted, the counts of k-mers seen in training are divided by their
sum (L1) and by their training standard deviation, and dotted with the logistic regression's
coefficients. The last two steps are linear, so a model keeps one weight per k-mer::

    score_e = sum_j count_j * weight_ej / sum_j count_j + bias_e,   j over the training k-mers

The component holds ``E`` such models on the same k-mers (counted once) and adds up their
scores through a link, each with its weight ``mix_e``::

    linear:      logit = sum_e mix_e * score_e
    log-sigmoid: logit = sum_e mix_e * log sigmoid(score_e)

With the log-sigmoid link a model can only lower the logit, by up to ``mix_e * |score_e|`` when
it is sure a sequence is a negative of its kind, and adds nearly nothing when it is sure of the
contrary: an expert on one kind of negative vetoes what it recognises and leaves the rest to
the network.

It reads the bases the network reads: the text of a token row (the kept tokens of an input;
special tokens read as ``N``), so every path that scores token rows (``predict-*``, ``eval``,
``scan``) scores the same ensemble, both strands and every window alike. k-mers with a base
other than ACGT are not counted (training sequences hold none).
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from genolong.errors import InputError, UserError, first_line

COMPONENT_FILE = "kmer_component.npz"
_CODES = np.full(256, 4, dtype=np.int64)
_CODES[np.frombuffer(b"ACGT", dtype=np.uint8)] = np.arange(4)


def kmer_index(kmer: str) -> int:
    """The base-4 index of an ACGT k-mer (A=0, C=1, G=2, T=3; first base most significant)."""
    index = 0
    for base in kmer:
        index = 4 * index + "ACGT".index(base)
    return index


LINKS = ("linear", "logsigmoid")


class KmerComponent:
    """``E`` k-mer models on one set of k-mers, each with a weight per k-mer and a bias, added up
    through a link (see the module docstring).

    Args:
        kmers: the training k-mers (V,), ACGT only, any lengths from 1 to 8.
        weights: shape (E, V) (or (V,) for one model), the weight of each k-mer in each model.
        bias: shape (E,) (or a number for one model).
        mix: shape (E,), the weight of each model's linked score (default: 1 each).
        link: ``linear`` or ``logsigmoid``.
    """

    def __init__(self, kmers: Sequence[str], weights: np.ndarray, bias, mix=None, link: str = "linear"):
        weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
        mix = np.ones(len(weights)) if mix is None else np.atleast_1d(np.asarray(mix, dtype=np.float64))
        if weights.ndim != 2 or weights.shape[1] != len(kmers) or not len(kmers):
            raise UserError(f"a k-mer component needs one weight per k-mer: {len(kmers)} k-mers, weights {weights.shape}")
        if not len(weights) == len(bias) == len(mix):
            raise UserError(f"a k-mer component needs a bias and a mix weight per model: {len(weights)} models, "
                            f"{len(bias)} biases, {len(mix)} mix weights")
        if link not in LINKS:
            raise UserError(f"unknown k-mer component link {link!r}; choose from {', '.join(LINKS)}")
        if any(not 1 <= len(k) <= 8 or set(k) - set("ACGT") for k in kmers):
            raise UserError("a k-mer component holds ACGT k-mers of 1 to 8 bases")
        self.kmers, self.weights, self.bias, self.mix, self.link = list(kmers), weights, bias, mix, link
        self.tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # k -> (weights (4**k, E), seen (4**k,))
        for k in sorted({len(kmer) for kmer in self.kmers}):
            self.tables[k] = (np.zeros((4**k, len(weights))), np.zeros(4**k))
        for column, kmer in enumerate(self.kmers):
            table, seen = self.tables[len(kmer)]
            table[kmer_index(kmer)], seen[kmer_index(kmer)] = weights[:, column], 1.0
        self.token_texts: np.ndarray | None = None

    @classmethod
    def from_pipeline(cls, pipeline, scale: float = 1.0, offset: float = 0.0) -> KmerComponent:
        """The component of a fitted baseline pipeline (``kmer_features`` + ``logistic``), its logit
        times ``scale`` plus ``offset``."""
        component = cls.from_pipelines([pipeline], [scale])
        component.bias += offset
        return component

    @classmethod
    def from_pipelines(
        cls, pipelines: Sequence[object], mix: Sequence[float] | None = None, link: str = "linear"
    ) -> KmerComponent:
        """One component of fitted baseline pipelines that count the same k-mers (fitted on one
        vocabulary): ``sum(mix_e * link(pipeline_e logit))``. With the linear link the models fold
        into one (their weighted sum is one k-mer model).

        Raises:
            ValueError: no pipeline, or pipelines that count different k-mers.
        """
        if not pipelines:
            raise ValueError("a k-mer component needs at least one pipeline")
        kmers, weights, bias = None, [], []
        for pipeline in pipelines:
            vocabulary = pipeline.named_steps["kmer_counts"].vocabulary_
            counted = sorted(vocabulary, key=vocabulary.get)
            if kmers is not None and counted != kmers:
                raise ValueError("k-mer pipelines to add up must count the same k-mers (fit them on one vocabulary)")
            kmers, logistic = counted, pipeline.named_steps["logistic"]
            weights.append(logistic.coef_[0] / pipeline.named_steps["scale"].scale_)
            bias.append(float(logistic.intercept_[0]))
        mix = np.ones(len(pipelines)) if mix is None else np.asarray(mix, dtype=np.float64)
        if link == "linear":
            return cls(kmers, mix @ np.array(weights), mix @ np.array(bias))
        return cls(kmers, np.array(weights), np.array(bias), mix, link)

    def scores(self, sequences: Sequence[str]) -> np.ndarray:
        """Each model's score of each sequence (uppercase; other letters than ACGT break k-mers),
        shape (B, E) float64, before the link.

        A sequence without any training k-mer gets the biases. The batch is scored as one string,
        its sequences joined by ``N`` (no k-mer spans two of them).
        """
        joined = "N".join(sequences) + "N"
        codes = _CODES[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)]  # (L,)
        owner = np.repeat(np.arange(len(sequences)), [len(s) + 1 for s in sequences])  # (L,) sequence of each base
        broken = np.concatenate([[0], np.cumsum(codes == 4)])  # non-ACGT bases before each position
        total, count = np.zeros((len(sequences), len(self.weights))), np.zeros(len(sequences))
        for k, (table, seen) in self.tables.items():
            n = len(codes) - k + 1
            if n < 1:
                continue
            starts = np.flatnonzero(broken[k : k + n] == broken[:n])  # windows of ACGT only
            index = np.zeros(len(starts), dtype=np.int64)
            for offset in range(k):
                index = 4 * index + codes[starts + offset]
            for model in range(len(self.weights)):
                total[:, model] += np.bincount(owner[starts], weights=table[index, model], minlength=len(sequences))
            count += np.bincount(owner[starts], weights=seen[index], minlength=len(sequences))
        return self.bias + np.divide(total, count[:, None], out=np.zeros_like(total), where=count[:, None] > 0)

    def logits(self, sequences: Sequence[str]) -> np.ndarray:
        """The component's logit of each sequence, shape (B,) float64: the models' :meth:`scores`
        through the link, weighted by ``mix`` and added up."""
        return self.combine(self.scores(sequences))

    def combine(self, scores: np.ndarray) -> np.ndarray:
        """(B, E) model scores -> (B,) logits: ``sum_e mix_e * link(score_e)``."""
        return self.linked(scores) @ self.mix

    def linked(self, scores: np.ndarray) -> np.ndarray:
        """The link of (B, E) model scores, elementwise."""
        return scores if self.link == "linear" else -np.logaddexp(0.0, -scores)

    def bind(self, tokenizer) -> KmerComponent:
        """Read token rows of ``tokenizer`` (see :meth:`token_logits`); returns self."""
        vocabulary = tokenizer.get_vocab()
        texts = np.full(max(vocabulary.values()) + 1, "N", dtype=object)  # N: no k-mer spans it
        for token, index in vocabulary.items():
            texts[index] = token
        texts[list(tokenizer.all_special_ids)] = "N"
        self.token_texts = texts
        return self

    def token_scores(self, input_ids: torch.Tensor) -> np.ndarray:
        """Each model's score (:meth:`scores`) of the bases of each token row: (B, T) ids -> (B, E) float64."""
        if self.token_texts is None:
            raise UserError("a k-mer component reads token rows once bound to a tokenizer (bind)")
        return self.scores(["".join(self.token_texts[row]) for row in input_ids.cpu().numpy()])

    def token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The component's logit of the bases of each token row, (B, T) ids -> (B,) float32 on their device."""
        return torch.from_numpy(self.combine(self.token_scores(input_ids))).float().to(input_ids.device)

    def save(self, directory: str | Path) -> None:
        np.savez(Path(directory) / COMPONENT_FILE, kmers=np.array(self.kmers), weights=self.weights, bias=self.bias,
                 mix=self.mix, link=np.array(self.link))

    @classmethod
    def load(cls, directory: str | Path, tokenizer) -> KmerComponent | None:
        """The component of a classifier directory, bound to its tokenizer; None when it has none.
        A file without ``mix`` and ``link`` holds one linear model.

        Raises:
            InputError: the file is not a k-mer component.
        """
        path = Path(directory) / COMPONENT_FILE
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                component = cls([str(k) for k in data["kmers"]], data["weights"], data["bias"],
                                data.get("mix"), str(data.get("link", "linear")))
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, UserError) as err:
            raise InputError(path, f"not a k-mer component (truncated or damaged: {first_line(err)})") from None
        return component.bind(tokenizer)
