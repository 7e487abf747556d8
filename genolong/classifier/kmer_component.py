"""The k-mer component of a classifier directory (``kmer_component.npz``): ``E`` k-mer models
(:mod:`genolong.evaluation.kmer_baseline`, one weight per training k-mer) whose logits, through a
link, are added to the network's: an ensemble fitted on held-out data
(:mod:`genolong.evaluation.kmer_models`)::

    score_e = sum_j count_j * weight_ej / sum_j count_j + bias_e,   j over the training k-mers
    logit_c = sum_e mix_ce * link(score)_e + offset_c
    link:  linear         score_e
           logsigmoid     log sigmoid(score_e)   (an expert that can only veto: promoter task)
           clipped_logit  log(p / (1 - p)), p = score_e clipped to [1e-4, 1 - 1e-4] (ridge on 0/1 labels)
           log_softmax    score_e - log sum_e' exp(score_e')   (a multinomial model's log-probabilities)

A stack also holds its weights on the network, ``network`` (C, C), applied in float64 (folding them
into the float32 output layer would lose precision) to the network's logits or, for a multi-class
stack, their log-softmax (``network_input``)::

    logits = x @ network.T + mix @ link(k-mer scores) + offset,   x = network logits or their log-softmax

The file holds ``version`` (2), ``kmers``, ``weights``, ``bias``, ``mix``, ``link``, ``offset`` and,
for a stack, ``network`` and ``network_input``; a file without ``version`` has one output (``mix``
(E,) or absent: ones, no offset). It reads the text of a token row (special tokens read as ``N``),
so every path that scores token rows scores the same ensemble; k-mers with non-ACGT bases are not counted.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from genolong.core.errors import InputError, UserError, first_line
from genolong.dna.kmers import acgt_kmers
from genolong.dna.sequence import BASES

COMPONENT_FILE = "kmer_component.npz"
LINKS = ("linear", "logsigmoid", "clipped_logit", "log_softmax")
VERSION = 2


#: Probabilities are clipped to [LOGIT_CLIP, 1 - LOGIT_CLIP] before a logit (a ridge model's 0/1 predictions).
LOGIT_CLIP = 1e-4


def clipped_logit(probabilities: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))`` of probabilities clipped to [LOGIT_CLIP, 1 - LOGIT_CLIP]."""
    clipped = np.clip(probabilities, LOGIT_CLIP, 1 - LOGIT_CLIP)
    return np.log(clipped / (1 - clipped))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of (N, C) logits along C (the max subtracted first)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


class KmerComponent:
    """``E`` k-mer models on one set of k-mers mapped through a link to ``C`` outputs (see the module
    docstring): ``kmers`` (V,) ACGT of 1 to 8 bases, ``weights`` (E, V) or (V,), ``bias`` (E,) or a
    number, ``mix`` (C, E) or (E,) (default: one output, 1 each), ``offset`` (C,) (default 0),
    ``network`` (C, C) or None (the network's logits as they are)."""

    def __init__(self, kmers: Sequence[str], weights: np.ndarray, bias, mix=None, link: str = "linear",
                 offset=None, network=None, network_input: str = "logits"):
        weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
        mix = np.ones((1, len(weights))) if mix is None else np.atleast_2d(np.asarray(mix, dtype=np.float64))
        offset = np.zeros(len(mix)) if offset is None else np.atleast_1d(np.asarray(offset, dtype=np.float64))
        network = None if network is None else np.asarray(network, dtype=np.float64)
        if weights.ndim != 2 or weights.shape[1] != len(kmers) or not len(kmers):
            raise UserError(f"a k-mer component needs one weight per k-mer: {len(kmers)} k-mers, weights {weights.shape}")
        if not len(weights) == len(bias) == mix.shape[1] or mix.ndim != 2:
            raise UserError(f"a k-mer component needs a bias and a mix weight per model: {len(weights)} models, "
                            f"{len(bias)} biases, mix {mix.shape}")
        if offset.shape != (len(mix),) or (network is not None and network.shape != (len(mix), len(mix))):
            raise UserError(f"a k-mer component of {len(mix)} outputs needs an offset per output and a (C, C) "
                            f"network matrix: offset {offset.shape}, network {None if network is None else network.shape}")
        if network_input not in ("logits", "log_softmax"):
            raise UserError(f"unknown network input {network_input!r}; choose logits or log_softmax")
        if link not in LINKS:
            raise UserError(f"unknown k-mer component link {link!r}; choose from {', '.join(LINKS)}")
        if any(not 1 <= len(k) <= 8 or set(k) - set(BASES) for k in kmers):
            raise UserError("a k-mer component holds ACGT k-mers of 1 to 8 bases")
        self.kmers, self.weights, self.bias, self.mix, self.link = list(kmers), weights, bias, mix, link
        self.offset, self.network, self.network_input = offset, network, network_input
        self.tables = {k: (np.zeros((4**k, len(weights))), np.zeros(4**k))  # weights (4**k, E), seen (4**k,)
                       for k in sorted(set(map(len, self.kmers)))}
        for column, kmer in enumerate(self.kmers):
            table, seen = self.tables[len(kmer)]
            index = acgt_kmers(kmer, len(kmer))[1]
            table[index], seen[index] = weights[:, column], 1.0
        self.token_texts: np.ndarray | None = None

    def scores(self, sequences: Sequence[str]) -> np.ndarray:
        """Each model's score (B, E) float64 of each uppercase sequence, before the link (the biases
        for a sequence without training k-mers). Scored as one string joined by ``N``."""
        joined = "N".join(sequences) + "N"
        owner = np.repeat(np.arange(len(sequences)), [len(s) + 1 for s in sequences])  # (L,) sequence of each base
        total, count = np.zeros((len(sequences), len(self.weights))), np.zeros(len(sequences))
        for k, (table, seen) in self.tables.items():
            starts, index = acgt_kmers(joined, k)
            for model in range(len(self.weights)):
                total[:, model] += np.bincount(owner[starts], weights=table[index, model], minlength=len(sequences))
            count += np.bincount(owner[starts], weights=seen[index], minlength=len(sequences))
        return self.bias + np.divide(total, count[:, None], out=np.zeros_like(total), where=count[:, None] > 0)

    def logits(self, sequences: Sequence[str]) -> np.ndarray:
        """The component's logits (B, C) float64 of each sequence."""
        return self.combine(self.scores(sequences))

    def combine(self, scores: np.ndarray) -> np.ndarray:
        """(B, E) model scores -> (B, C) logits: ``sum_e mix_ce * link(score)_e + offset_c``."""
        return self.score_logits(torch.from_numpy(np.asarray(scores, dtype=np.float64))).numpy()

    def score_logits(self, scores: torch.Tensor) -> torch.Tensor:
        """:meth:`combine` on a float64 tensor, differentiable: (B, E) scores -> (B, C) logits."""
        return self._link(scores) @ torch.from_numpy(self.mix.T).to(scores.device) + torch.from_numpy(
            self.offset).to(scores.device)

    def _link(self, scores: torch.Tensor) -> torch.Tensor:
        if self.link == "linear":
            return scores
        if self.link == "logsigmoid":
            return -torch.logaddexp(torch.zeros_like(scores), -scores)
        if self.link == "clipped_logit":
            clipped = scores.clamp(LOGIT_CLIP, 1 - LOGIT_CLIP)
            return torch.log(clipped / (1 - clipped))
        return torch.log_softmax(scores, dim=1)

    def base_shares(self, sequence: str) -> np.ndarray:
        """Each base's share (E, L) float64 of each model's score of an uppercase sequence: each
        k-mer occurrence's ``weight / count`` split evenly over its k bases; the shares add up to the
        score minus the bias."""
        shares, count = np.zeros((len(sequence), len(self.weights))), 0.0
        for k, (table, seen) in self.tables.items():
            starts, index = acgt_kmers(sequence, k)
            count += seen[index].sum()
            for offset in range(k):
                shares[starts + offset] += table[index] / k
        return (shares / count if count else shares).T

    def parts(self) -> list[str]:
        """What the classifier's logits are made of: ``network`` unless the stack weighs the network
        by 0 (the saved model is the k-mer model), and ``k-mer model`` unless every mix weight is 0."""
        kept = [] if self.network is not None and not self.network.any() else ["network"]
        return kept + (["k-mer model"] if self.mix.any() else [])

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
        """The component's logits of the bases of each token row, (B, T) ids -> (B, C) float32 on their device."""
        return torch.from_numpy(self.combine(self.token_scores(input_ids))).float().to(input_ids.device)

    def network_part(self, network_logits: torch.Tensor) -> torch.Tensor:
        """The stack's network part, differentiable: (B, C) network logits -> ``x @ network.T`` (B, C)
        float64; the logits as they are without a ``network`` matrix."""
        if self.network is None:
            return network_logits
        x = network_logits.double()
        if self.network_input == "log_softmax":
            x = torch.log_softmax(x, dim=1)
        return x @ torch.from_numpy(self.network.T).to(x.device)

    def apply(self, network_logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """The classifier's logits (B, C) float32 from the network's (B, C) and their token rows (B, T):
        :meth:`network_part` plus the component's logits (float64 with a ``network`` matrix, else float32)."""
        if self.network is None:
            return network_logits.float() + self.token_logits(input_ids)
        kmer = torch.from_numpy(self.combine(self.token_scores(input_ids))).to(network_logits.device)
        return (self.network_part(network_logits) + kmer).float()

    def save(self, directory: str | Path) -> None:
        arrays = {"version": np.array(VERSION), "kmers": np.array(self.kmers), "weights": self.weights,
                  "bias": self.bias, "mix": self.mix, "link": np.array(self.link), "offset": self.offset}
        if self.network is not None:
            arrays |= {"network": self.network, "network_input": np.array(self.network_input)}
        np.savez(Path(directory) / COMPONENT_FILE, **arrays)

    @classmethod
    def load(cls, directory: str | Path, tokenizer) -> KmerComponent | None:
        """The component of a classifier directory, bound to its tokenizer; None when it has none
        (InputError: not a k-mer component, or of a newer format)."""
        path = Path(directory) / COMPONENT_FILE
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                version = int(data["version"]) if "version" in data else 1
                if version > VERSION:
                    raise InputError(path, f"a k-mer component of format {version}; this genolong reads up to "
                                     f"{VERSION}", hint="upgrade genolong")
                component = cls([str(k) for k in data["kmers"]], data["weights"], data["bias"],
                                data.get("mix"), str(data.get("link", "linear")), data.get("offset"),
                                data.get("network"), str(data.get("network_input", "logits")))
        except InputError:
            raise
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, UserError) as err:
            raise InputError(path, f"not a k-mer component (truncated or damaged: {first_line(err)})") from None
        return component.bind(tokenizer)
