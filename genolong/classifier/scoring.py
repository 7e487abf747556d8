"""The one scoring primitive, :func:`token_logits`: token rows through a fine-tuned model.

Determinism: a batch's values depend on its rows, the model and the precision only (not on the
thread count or the split of work between ranks): unpadded batches run the default attention
kernels without a mask, padded ones the math kernel (the masked flash kernel is not
thread-invariant); batches of fewer than :data:`MIN_ROWS` rows are filled up with copies of their
last row (float32 GEMMs of some small row counts depend on the thread count).

``first_token_only=True`` (``scan`` only) computes the last layer's [CLS] row only where the model
supports it (:func:`supports_first_token_only`): half that layer's cost, equal to the full layer's
values in exact arithmetic but not in the last float32 bits.
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from genolong.model.heads import output_activation
from genolong.runtime.precision import autocast

#: Fewest rows a batch is run with (see the module docstring).
MIN_ROWS = 12


def supports_first_token_only(model) -> bool:
    """Whether ``model``'s last layer can compute the [CLS] row only: its encoder supports it and
    its head reads [CLS] (no token pooling, no SLED fusion)."""
    return model.genolong.encoder.supports_first_token_only and getattr(model, "fusion", None) is None


@torch.inference_mode()
def token_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, kmer=None,
                 precision: str | None = None, first_token_only: bool = False) -> torch.Tensor:
    """Logits (B, C) float32 on the model's device of token rows ``input_ids``, ``attention_mask`` (B, T)
    ((B, T, V) for a ``GenolongForMaskedLM``), under the module's determinism rule.

    Args:
        kmer: the classifier's :class:`~genolong.classifier.kmer_component.KmerComponent`, or None.
        precision: ``32-true``, ``bf16-mixed``, ...; None: the caller's autocast (a Lightning Trainer's).
    """
    rows = input_ids.shape[0]
    if rows < MIN_ROWS:
        fill = [*range(rows), *[rows - 1] * (MIN_ROWS - rows)]
        input_ids, attention_mask = input_ids[fill], attention_mask[fill]
    padded = not bool(attention_mask.all())
    kernel = sdpa_kernel(SDPBackend.MATH) if padded else contextlib.nullcontext()
    mask = attention_mask if padded else None
    precision_context = contextlib.nullcontext() if precision is None else autocast(input_ids.device, precision)
    with kernel, precision_context:
        if first_token_only and supports_first_token_only(model):
            hidden = model.genolong.encoder(input_ids, mask, first_token_only=True)  # (B, 1, N)
            logits = model.classifier(hidden)[0]
        else:
            logits = model(input_ids=input_ids, attention_mask=mask).logits
    logits = logits.float()
    if kmer is not None:
        logits = kmer.apply(logits, input_ids)
    return logits[:rows]


def token_outputs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, kmer=None,
                  precision: str | None = None, first_token_only: bool = False) -> torch.Tensor:
    """:func:`token_logits` through the model's ``problem_type``'s activation
    (:func:`~genolong.model.heads.output_activation`): (B, C) float32."""
    logits = token_logits(model, input_ids, attention_mask, kmer=kmer, precision=precision,
                          first_token_only=first_token_only)
    return output_activation(logits, model.config.problem_type)


def average_strands(outputs):
    """(2B, C) outputs of B inputs then their B reverse complements (array or tensor) -> (B, C) means."""
    half = outputs.shape[0] // 2
    return (outputs[:half] + outputs[half:]) / 2
