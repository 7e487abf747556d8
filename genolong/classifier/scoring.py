"""The one scoring primitive: token rows through a fine-tuned model, its outputs per problem type.

:func:`token_logits` and :func:`token_outputs` are what every command scores with (``predict``,
``scan``, ``score-variants``, ``explain``, evaluation and the validation of a fine-tuning run,
through :class:`~genolong.classifier.directory.Classifier` or directly), so they all follow one
rule.

Determinism: the values of a batch depend on its rows, the model and the precision only, not on
the number of threads or on how the work is shared between ranks, so that any split of a command's
work writes the same bytes:

* without padding the default attention kernels are thread-invariant and run without a mask; with
  padding (windows with N runs, BPE windows of unequal token counts) the masked flash kernel is
  not, so those batches run the math kernel;
* float32 GEMMs and attention kernels can give results that depend on the thread count for some
  small row counts (which ones depends on the shapes and the BLAS library), and the output
  layer has one row per input: batches of fewer than :data:`MIN_ROWS` rows are run filled up with
  copies of their last row;
* the model runs in eval mode, without autograd, under the autocast of its precision.

The [CLS]-only last layer is a caller's choice (``first_token_only=True``, taken by ``scan``): for
models whose encoder supports it (dense attention) and whose head reads [CLS] (no mean or max
pooling, no SLED fusion), the last layer then computes the [CLS] row only
(:attr:`~genolong.model.encoder.Encoder.supports_first_token_only`), the values the output layer
reads for about half the cost of that layer. Its values equal the full layer's in exact arithmetic,
not in the last bits of float32 (GEMMs of other shapes round differently): ``predict``,
``score-variants``, ``explain`` and evaluation run the full layer and score the values of the
model's plain forward pass, and ``scan``, which scores every window of a genome, takes the shortcut.
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
    """Logits of token rows, under the module's determinism rule.

    Args:
        model: a ``GenolongForSequenceClassification`` in eval mode (or a ``GenolongForMaskedLM``,
            whose logits are (B, T, V): ``score-variants --score mlm-llr``).
        input_ids: (B, T) int64 token rows ``[CLS] tokens [SEP] [PAD]...`` on the model's device.
        attention_mask: (B, T), 1 for real tokens.
        kmer: the classifier's :class:`~genolong.classifier.kmer_component.KmerComponent`, which
            turns the network's logits into its network + k-mer stack's
            (:meth:`~genolong.classifier.kmer_component.KmerComponent.apply`), or None.
        precision: ``32-true``, ``bf16-mixed``, ...; None: the caller's autocast (a Lightning
            Trainer's precision).
        first_token_only: compute the last layer's [CLS] row only where the model supports it
            (:func:`supports_first_token_only`; see the module docstring).

    Returns:
        (B, C) float32 logits on the model's device ((B, T, V) for a masked-LM model).
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
    """The outputs of token rows per the model's ``problem_type``
    (:func:`~genolong.model.heads.output_activation`: sigmoids, a softmax or regression values):
    (B, C) float32 on the model's device. Arguments as :func:`token_logits`'."""
    logits = token_logits(model, input_ids, attention_mask, kmer=kmer, precision=precision,
                          first_token_only=first_token_only)
    return output_activation(logits, model.config.problem_type)


def average_strands(outputs):
    """(2B, C) outputs of B inputs followed by their B reverse complements (a NumPy array or a
    tensor) -> (B, C), the mean of both strands (selene's ``NonStrandSpecific``, mode "mean")."""
    half = outputs.shape[0] // 2
    return (outputs[:half] + outputs[half:]) / 2
