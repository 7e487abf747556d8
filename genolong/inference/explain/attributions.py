"""Attributions of a classifier's outputs to the bases of its input: in-silico mutagenesis and gradients.

Both give (P, 4, L) arrays per record (P outputs, channels A, C, G, T, L bases of the attributed window)
of the scores :func:`attributed` returns. :func:`saturation_mutagenesis` mutates every base to the 3 others
(an ``N`` to all four): ``effect[p, b, i] = score_p(sequence with base b at i) - score_p(sequence)``.
:func:`gradient_attributions` runs captum's integrated gradients (Sundararajan et al. 2017) or input x
gradient on the token embeddings from a ``[PAD]`` baseline, spreading each token's sum over its bases.
With a k-mer component the gradients add up, per base, each part the model gives a weight
(:func:`gradient_parts`): the k-mer model's is each base's share of each k-mer model's score times the
gradient with respect to those scores (for ``ig`` averaged over ``steps`` points from the biases).
"""

from __future__ import annotations

import numpy as np
import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

from genolong.classifier.task_info import ACTIVATIONS
from genolong.core.errors import UserError
from genolong.dna.sequence import BASES, clean
from genolong.runtime.precision import autocast

GRADIENT_METHODS = ("ig", "input-x-gradient")


def one_hot(sequence: str) -> np.ndarray:
    """(4, L) float32 one-hot in ``ACGT`` order; ``N`` is all zeros."""
    codes = np.frombuffer(clean(sequence).encode("ascii"), dtype=np.uint8)
    return np.stack([codes == ord(base) for base in BASES]).astype(np.float32)


def mutants(sequence: str, start: int, length: int) -> tuple[list[str], list[tuple[int, int]]]:
    """Every single-base substitution of ``sequence[start:start + length]``: the mutant sequences and, for
    each, ``(channel, position in the window)``."""
    sequences, where = [], []
    for position in range(length):
        index = start + position
        for channel, base in enumerate(BASES):
            if sequence[index] != base:
                sequences.append(sequence[:index] + base + sequence[index + 1 :])
                where.append((channel, position))
    return sequences, where


def attributed(classifier, logits: torch.Tensor) -> torch.Tensor:
    """The scores attributed (B, C) from ``classifier``'s logits (B, C): its softmax's probabilities,
    or the logits themselves (sigmoid logits, regression values)."""
    if classifier.model.config.problem_type == ACTIVATIONS["softmax"]:
        return torch.softmax(logits, dim=-1)
    return logits


def saturation_mutagenesis(classifier, sequence: str, start: int, length: int, columns: list[int],
                           batch_size: int, progress=None) -> np.ndarray:
    """(P, 4, L) effects on the attributed scores of every substitution in ``sequence[start:start + length]``."""
    sequence = clean(sequence)
    reference = attributed(classifier, classifier.logits([sequence]))[0, columns].cpu().numpy()
    sequences, where = mutants(sequence, start, length)
    effects = np.zeros((len(columns), 4, length), np.float32)
    for first in range(0, len(sequences), batch_size):
        scores = attributed(classifier, classifier.logits(sequences[first : first + batch_size]))
        scores = scores[:, columns].cpu().numpy()
        for (channel, position), row in zip(where[first : first + batch_size], scores, strict=True):
            effects[:, channel, position] = row - reference
        if progress is not None:
            progress.update(len(scores))
    return effects


def gradient_parts(classifier) -> list[str]:
    """The parts of ``classifier`` its logits give a weight (``network``, ``k-mer model``)."""
    return ["network"] if classifier.kmer is None else classifier.kmer.parts()


def _network_logits(classifier, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The network's logits (B, C) float32."""
    with autocast(classifier.device, classifier.precision):
        return classifier.model(input_ids=input_ids, attention_mask=attention_mask).logits.float()


def _token_attributor(classifier, method: str):
    def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        logits = _network_logits(classifier, input_ids, attention_mask)  # (B, C)
        if classifier.kmer is not None:  # the whole model's logits; the k-mer part is constant here
            logits = classifier.kmer.apply(logits, input_ids)
        return attributed(classifier, logits)

    layer = classifier.model.get_input_embeddings()
    if method == "ig":
        return LayerIntegratedGradients(forward, layer)
    if method == "input-x-gradient":
        return LayerGradientXActivation(forward, layer)
    raise UserError(f"--gradients must be one of {', '.join(GRADIENT_METHODS)}, got {method!r}")


def _kmer_part(classifier, input_ids: torch.Tensor, text: str, column: int, method: str, steps: int) -> np.ndarray:
    """(len(text),) attributions of the k-mer part to the bases ``text`` of the token row ``input_ids``
    (1, T) for output ``column`` (module docstring)."""
    kmer = classifier.kmer
    with torch.no_grad():
        network = kmer.network_part(_network_logits(classifier, input_ids, torch.ones_like(input_ids)))
    scores, bias = torch.from_numpy(kmer.token_scores(input_ids)), torch.from_numpy(kmer.bias)  # (1, E), (E,)
    if method == "ig":  # midpoints of `steps` intervals from the biases to the scores
        alphas = (torch.arange(steps, dtype=torch.float64)[:, None] + 0.5) / steps
    else:
        alphas = torch.ones(1, 1, dtype=torch.float64)
    path = (bias + alphas * (scores - bias)).requires_grad_(True)  # (S, E)
    logits = network.double().cpu() + kmer.score_logits(path)
    gradient = torch.autograd.grad(attributed(classifier, logits)[:, column].sum(), path)[0].mean(0)  # (E,)
    return gradient.numpy() @ kmer.base_shares(text)


def gradient_attributions(classifier, sequence: str, start: int, length: int, columns: list[int], *,
                          method: str = "ig", steps: int = 16) -> np.ndarray:
    """(P, 4, L) attributions of ``sequence[start:start + length]`` (module docstring)."""
    sequence = clean(sequence)
    encoder = classifier.encode
    encoding = encoder.backend.encode(sequence, add_special_tokens=False)
    kept = encoder.kept(len(encoding.ids))
    ids, offsets = encoding.ids[kept], encoding.offsets[kept]
    rows = encoder.pad([ids])
    input_ids, mask = rows["input_ids"].to(classifier.device), rows["attention_mask"].to(classifier.device)
    baseline = input_ids.clone()
    baseline[0, 1:-1] = encoder.pad_id
    parts = gradient_parts(classifier)
    attributor = _token_attributor(classifier, method)
    options = {"baselines": baseline, "n_steps": steps} if method == "ig" else {}
    reference = one_hot(sequence)
    read = slice(offsets[0][0], offsets[-1][1])  # the bases the model reads
    result = np.zeros((len(columns), 4, length), np.float32)
    for row, column in enumerate(columns):
        per_base = np.zeros(len(sequence), np.float32)
        if "network" in parts:
            tokens = attributor.attribute(input_ids, target=column, additional_forward_args=(mask,), **options)
            per_token = tokens.sum(-1)[0, 1:-1].detach().float().cpu().numpy()  # (T,) without [CLS]/[SEP]
            for value, (first, last) in zip(per_token, offsets, strict=True):
                per_base[first:last] = value / max(1, last - first)
        if "k-mer model" in parts:
            per_base[read] += _kmer_part(classifier, input_ids, sequence[read], column, method, steps)
        result[row] = (reference * per_base)[:, start : start + length]
    return result
