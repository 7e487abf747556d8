"""The LSG extrapolation experiment on DNA (Condevaux & Harispe 2023, §4.1 and Table 1).

A ``full`` model pretrained at L tokens is converted (:mod:`genolong.convert.long`) to full
attention with copied positions, LSG, BigBird, Longformer and SLED, each with the conversion's
defaults, and its masked-token bits per base pair (BPC) is measured on held-out DNA at L and at
every ``m L`` tokens (``multiples``):

* **without training**: the converted weights as they are;
* **after a short MLM fine-tune** (``finetune_steps`` AdamW steps at the longest length, on the
  corpus' training split) when ``finetune_steps > 0``.

Beside them: the source model at L, and the token-unigram baseline (Laplace-smoothed token
frequencies of the training split) on the same masked tokens. BPC is the pretraining run's
(:mod:`genolong.training.pretrain`): the masked tokens' total NLL in bits over the base pairs they
cover, BERT masking (15 %: 80 % [MASK], 10 % random, 10 % kept) seeded per window.

Every length reads about the same DNA: the first ``eval_tokens // (T - 2)`` windows of T tokens
of the corpus' ``test`` split (windows are packed from whole sentences, as in pretraining).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genolong.attention import attention_class
from genolong.convert import genolong_weights
from genolong.convert.long import LongSpec, describe_long, long_backbones, make_long
from genolong.convert.source import read_source
from genolong.convert.target import build_model
from genolong.core.errors import UserError
from genolong.datasets.corpus import Corpus
from genolong.datasets.mlm import MaskingConfig, MLMWindows, SpecialIds, collate_windows
from genolong.dna.tokenizer import token_lengths
from genolong.model.loading import load_model_tokenizer, read_model_config
from genolong.training.pretrain import unigram_log2_probs

log = logging.getLogger(__name__)

#: The backbones measured by default (any of :func:`~genolong.convert.long.long_backbones` can be).
BACKBONES = ("full", "lsg", "bigbird", "longformer", "sled")
LN2 = math.log(2)


@dataclass(frozen=True)
class ExtrapolationConfig:
    """Settings of one experiment.

    Attributes:
        backbones: converted models to measure (default :data:`BACKBONES`; ``full`` = copied positions).
        multiples: the long lengths as multiples of the trained length L (LSG Table 1: 8).
        eval_tokens: tokens read per length (windows of T tokens: ``eval_tokens // (T - 2)``).
        finetune_steps: MLM fine-tuning steps at the longest length (0: none).
        batch_size: windows per step and per evaluation call.
        learning_rate: AdamW peak rate of the fine-tune (10 % linear warm-up, then linear decay).
        block_size: the conversion's ``--block-size`` (None: its defaults).
        seed: masking, fine-tuning order and dropout.
    """

    backbones: tuple[str, ...] = BACKBONES
    multiples: tuple[int, ...] = (4, 8)
    eval_tokens: int = 65536
    finetune_steps: int = 0
    batch_size: int = 1
    learning_rate: float = 5e-4
    block_size: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.backbones) - set(long_backbones()))
        if unknown or not self.backbones:
            raise UserError(f"--backbones: choose among {', '.join(long_backbones())}, got {', '.join(unknown) or 'none'}")
        if not self.multiples or min(self.multiples) < 2:
            raise UserError(f"--multiples must be integers >= 2, got {self.multiples}")
        for name in ("eval_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")


class MaskedLMScorer:
    """Masked-token BPC of models on one corpus split, with the unigram baseline on the same tokens."""

    def __init__(self, corpus: Corpus, tokenizer, config: ExtrapolationConfig, device: torch.device):
        self.corpus, self.config, self.device = corpus, config, device
        self.special = SpecialIds.from_tokenizer(tokenizer)
        vocab = len(tokenizer)
        self.token_bp = torch.as_tensor(token_lengths(tokenizer)[:vocab], dtype=torch.float64)
        self.unigram_bits = torch.as_tensor(-unigram_log2_probs(corpus, vocab), dtype=torch.float64)

    def windows(self, split: str, length: int) -> MLMWindows:
        return MLMWindows(self.corpus, split, self.special, length, MaskingConfig(), seed=self.config.seed)

    @torch.no_grad()
    def score(self, model, length: int) -> dict[str, float]:
        """BPC of ``model`` (eval mode) on windows of ``length`` tokens of the test split:
        ``bpc``, ``unigram_bpc``, ``masked_tokens``, ``windows``."""
        windows = self.windows("test", length)
        count = min(len(windows), max(1, self.config.eval_tokens // (length - 2)))
        sums = torch.zeros(4, dtype=torch.float64)
        for first in range(0, count, self.config.batch_size):
            batch = collate_windows([windows[i] for i in range(first, min(count, first + self.config.batch_size))],
                                    self.special.pad)
            logits = model(**{k: v.to(self.device) for k, v in batch.items()}).logits  # (M, V)
            targets = batch["labels"][batch["labels"] != -100]
            nll = torch.nn.functional.cross_entropy(logits.float(), targets.to(self.device), reduction="sum")
            sums += torch.stack([nll.double().cpu(), self.token_bp[targets].sum(), self.unigram_bits[targets].sum(),
                                 torch.tensor(float(len(targets)), dtype=torch.float64)])
        nll, bp, unigram, masked = sums.tolist()
        return {"bpc": nll / LN2 / bp, "unigram_bpc": unigram / bp, "masked_tokens": int(masked), "windows": count}

    def finetune(self, model, length: int) -> None:
        """``finetune_steps`` MLM steps of AdamW on windows of ``length`` tokens of the train split."""
        config = self.config
        windows = self.windows("train", length)
        rng = np.random.default_rng(config.seed)
        order = rng.permutation(np.resize(np.arange(len(windows)), config.finetune_steps * config.batch_size))
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
        warmup = max(1, config.finetune_steps // 10)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(
            (step + 1) / warmup, max(0.0, (config.finetune_steps - step) / max(1, config.finetune_steps - warmup))))
        torch.manual_seed(config.seed)
        model.train()
        for step in range(config.finetune_steps):
            picked = order[step * config.batch_size:(step + 1) * config.batch_size]
            batch = collate_windows([windows[(step * config.batch_size + j, int(w))] for j, w in enumerate(picked)],
                                    self.special.pad)
            loss = model(**{k: v.to(self.device) for k, v in batch.items()}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        model.eval()


def run_extrapolation(model_dir: Path, corpus_dir: Path, config: ExtrapolationConfig,
                      device: torch.device) -> dict[str, Any]:
    """The experiment (module docstring); returns the report (rows of backbone, stage, length, BPC).

    Raises:
        UserError: a source model that is not a masked-LM model with full attention, a corpus built
            with another tokenizer or without a test split, an impossible conversion.
    """
    base = read_model_config(model_dir)
    if base.backbone != "full" or "GenolongForMaskedLM" not in (base.architectures or []):
        raise UserError(f"{model_dir}: the experiment needs a masked-LM model with full attention "
                        f"(got {base.architectures} with backbone {base.backbone!r})")
    tokenizer = load_model_tokenizer(model_dir, base)
    corpus = Corpus(corpus_dir)
    if corpus.tokenizer_fingerprint != base.tokenizer_fingerprint:
        raise UserError(f"{corpus_dir} was tokenized with another tokenizer than {model_dir}",
                        hint=f"build it with `genolong corpus build --tokenizer {model_dir}`")
    trained = base.max_position_embeddings
    lengths = [trained] + [m * trained for m in sorted(set(config.multiples))]
    scorer = MaskedLMScorer(corpus, tokenizer, config, device)
    fields, state = genolong_weights(read_source(model_dir))
    rows = []

    def measure(model, backbone: str, stage: str, measured: list[int]) -> None:
        for length in measured:
            result = scorer.score(model, length)
            rows.append({"backbone": backbone, "stage": stage, "length": length} | result)
            log.info("extrapolate: %s (%s) at %d tokens: %.4f BPC (unigram %.4f)", backbone, stage, length,
                     result["bpc"], result["unigram_bpc"])

    measure(build_model(dict(fields), dict(state)).to(device), "source", "trained", [trained])
    for backbone in config.backbones:
        spec = LongSpec(backbone, lengths[-1] if attention_class(backbone).extends_positions else None, config.block_size)
        model = build_model(*make_long(dict(fields), state, spec)).to(device)
        log.info("extrapolate: %s", describe_long(model.config))
        measure(model, backbone, "converted", lengths)
        if config.finetune_steps:
            scorer.finetune(model, lengths[-1])
            measure(model, backbone, f"fine-tuned {config.finetune_steps} steps", lengths)
    return {"model": str(model_dir), "corpus": str(corpus_dir), "trained_length": trained, "lengths": lengths,
            "settings": asdict(config), "device": str(device), "rows": rows,
            "unigram": {row["length"]: row["unigram_bpc"] for row in rows}}


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """``out/extrapolation.json``, ``.tsv``, ``.md`` (the table) and ``.png`` (the plot), atomically."""
    from genolong.core.files import atomic_write_text
    from genolong.experiments.extrapolate_report import markdown_table, plot, tsv

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"extrapolation.{suffix}" for suffix in ("json", "tsv", "md", "png")]
    atomic_write_text(paths[0], json.dumps(report, indent=2) + "\n")
    atomic_write_text(paths[1], tsv(report))
    atomic_write_text(paths[2], markdown_table(report))
    plot(report, paths[3])
    return paths
