"""Block-sparse attention at long lengths against the dense float64 reference, forward and backward.

At 4K-64K tokens the dense ``(L, L)`` matrices no longer fit, so the reference is exact on a
*sample of query rows*: the candidate path (flex on CUDA, the gathered-blocks path elsewhere) runs
on the whole sequence in the dtype under test with a loss on the sampled rows' outputs only, and
the reference computes those rows in float64 as a masked softmax over every key, the mask read from
the pattern's own predicate (:meth:`~genolong.attention.pattern.BlockPattern.mask_mod`). Rows are
independent, so the sampled outputs and the gradients of q (the sampled rows), k and v (every key)
are exact. The sample holds the global rows, the first and last query blocks and random rows.

Shapes: q, k, v ``(B, H, L, D)``; rows ``(R,)``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from genolong.attention import attention_class, attention_config, build_attention
from genolong.attention.blocksparse import PATHS, _key_validity
from genolong.attention.paths import PatternInputs

#: The block-sparse backbones checked, at their paper defaults.
BACKBONES = ("bigbird", "longformer", "lsg")
#: Max abs error of outputs (and of gradients, scaled by their largest magnitude) per dtype.
TOLERANCE = {torch.float32: 5e-3, torch.bfloat16: 5e-2}


@dataclass(frozen=True)
class KernelCase:
    """One check: a backbone at about ``length`` tokens in ``dtype`` (``heads`` x ``head_dim``)."""

    backbone: str
    length: int
    dtype: torch.dtype
    heads: int = 12
    head_dim: int = 64


def attention_at(case: KernelCase, device: torch.device, path: str):
    """``(module, length)``: the attention module of ``case``, running ``path``, and the valid input
    length closest below ``case.length``."""
    probe = attention_config(case.backbone, num_attention_heads=case.heads,
                             hidden_size=case.heads * case.head_dim, max_position_embeddings=case.length)
    cls = attention_class(case.backbone)
    extra, multiple = cls.num_extra_global_tokens(probe), cls.length_multiple(probe)
    length = extra + (case.length - extra) // multiple * multiple
    module = build_attention(probe).to(device)
    module.attention_impl = path
    return module, length


def path_inputs(module, q, k, v, padding_mask) -> PatternInputs:
    """What ``module.forward`` hands its path: the pattern, key validity and extra keys (LSG's sparse
    tokens), the extra keys detached as leaves of their own so that a check sees the path alone."""
    pattern = module.pattern_for(q.shape[2], q.device)
    with torch.no_grad():
        extra = module.extra_keys(k, v, padding_mask, pattern.num_global)
    extra_k, extra_v, extra_valid = (None, None, None) if extra is None else extra
    num_extra = 0 if extra_k is None else extra_k.shape[2]
    key_valid = _key_validity(padding_mask, extra_valid, q.shape[2], num_extra, q.device)
    extra_k, extra_v = (None if x is None else x.detach().requires_grad_() for x in (extra_k, extra_v))
    return PatternInputs(q, k, v, pattern, key_valid, extra_k, extra_v)


def _leaves(inputs: PatternInputs) -> list[torch.Tensor]:
    return [x for x in (inputs.q, inputs.k, inputs.v, inputs.extra_k, inputs.extra_v) if x is not None]


def dense_rows(inputs: PatternInputs, rows: torch.Tensor) -> torch.Tensor:
    """Reference outputs ``(B, H, R, D)`` of the query ``rows``: a masked softmax over every key
    (zeros for a row with no visible key, as in the dense reference)."""
    pattern = inputs.pattern
    heads = torch.arange(pattern.heads, device=rows.device)[:, None, None]
    keys_at = torch.arange(pattern.num_keys, device=rows.device)[None, None, :]
    mask = pattern.mask_mod()(None, heads, rows[None, :, None], keys_at)[None]  # (1, Hp, R, K)
    if inputs.key_valid is not None:
        mask = mask & inputs.key_valid[:, :, None, :]
    q = inputs.q[:, :, rows]
    scores = (q @ inputs.keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, R, K)
    probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    probs = torch.where(mask.any(dim=-1, keepdim=True), probs, 0.0)
    return probs @ inputs.values


def sample_rows(length: int, num_global: int, block: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """``(R,)`` sorted distinct rows: the globals, the first and last ``block`` rows, random others."""
    fixed = torch.cat([torch.arange(num_global), torch.arange(num_global, num_global + block),
                       torch.arange(length - block, length)])
    others = torch.randperm(length, generator=generator)[:count]
    return torch.unique(torch.cat([fixed, others]).clamp(0, length - 1))


def check_case(case: KernelCase, device: torch.device, path: str, rows: int = 512, seed: int = 0) -> dict:
    """Run ``path`` on ``case`` and compare outputs and gradients (relative to their largest
    magnitude) with the float64 reference: a result row with the max errors, ``ok`` and the time."""
    module, length = attention_at(case, device, path)
    generator = torch.Generator().manual_seed(seed)
    shape = (1, case.heads, length, case.head_dim)
    base = [torch.randn(shape, generator=generator, dtype=torch.float64).to(device) for _ in range(3)]
    padding_mask = torch.ones(1, length, dtype=torch.bool, device=device)
    padding_mask[0, -37:] = False  # a ragged end: padding that is not block-aligned
    pattern = module.pattern_for(length, device)
    picked = sample_rows(length, pattern.num_global, pattern.query_block, rows, generator).to(device)
    picked = picked[padding_mask[0, picked]]  # padding rows' outputs are never used
    weights = torch.randn((1, case.heads, len(picked), case.head_dim), generator=generator,
                          dtype=torch.float64).to(device)

    q, k, v = (x.to(case.dtype).requires_grad_() for x in base)
    inputs = path_inputs(module, q, k, v, padding_mask)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    out = PATHS[path](inputs)
    (out[:, :, picked].double() * weights).sum().backward()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    peak_gb = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None

    # the reference sees the same (rounded) inputs, extra keys included, in float64
    leaves64 = [x.detach().double().requires_grad_() for x in _leaves(inputs)]
    q64, k64, v64, *extra64 = leaves64
    inputs64 = PatternInputs(q64, k64, v64, pattern, inputs.key_valid, *(extra64 or (None, None)))
    ref = dense_rows(inputs64, picked)
    (ref * weights).sum().backward()

    out_error = (out[:, :, picked].double() - ref).abs().max().item()
    grad_errors = [((g.grad.double() - r.grad).abs().max() / r.grad.abs().max().clamp_min(1e-12)).item()
                   for g, r in zip(_leaves(inputs), leaves64, strict=True)]
    tolerance = TOLERANCE[case.dtype]
    return {"backbone": case.backbone, "tokens": length, "dtype": str(case.dtype).removeprefix("torch."),
            "path": path, "rows": len(picked), "out_error": out_error, "grad_error": max(grad_errors),
            "tolerance": tolerance, "ok": out_error < tolerance and max(grad_errors) < tolerance,
            "seconds": seconds, "peak_gb": peak_gb}
