"""The LSG extrapolation experiment on DNA (Condevaux & Harispe 2023, §4.1 and Table 1).

A ``full`` model pretrained at L tokens is converted (:mod:`genolong.convert.long`) to each of
``backbones`` and its masked-token bits per base pair (BPC, as in pretraining: BERT masking seeded
per window) is measured on the corpus' ``test`` split at L and at every ``m L`` tokens, without
training and after ``finetune_steps`` MLM steps at the longest length, beside the source model at
L and the token-unigram baseline (Laplace-smoothed training-split frequencies) on the same masked
tokens. Every length reads about the same DNA: the first ``eval_tokens // (T - 2)`` windows of T
tokens. The outputs: a TSV of every measurement, the Markdown table (LSG's Table 1 for DNA) and the
plot. The guide: ``docs/guide/long-context.md``.
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
from genolong.core.files import atomic_path, atomic_write_text
from genolong.datasets.corpus import Corpus
from genolong.datasets.mlm import MaskingConfig, MLMWindows, SpecialIds, collate_windows
from genolong.dna.tokenizer import token_lengths
from genolong.model.loading import load_model_tokenizer, read_model_config
from genolong.training.pretrain import unigram_log2_probs

log = logging.getLogger(__name__)

#: The backbones measured by default (any of :func:`~genolong.convert.long.long_backbones` can be).
BACKBONES = ("full", "lsg", "bigbird", "longformer", "sled")
#: The columns of extrapolation.tsv.
COLUMNS = ("backbone", "stage", "length", "bpc", "unigram_bpc", "masked_tokens", "windows")


@dataclass(frozen=True)
class ExtrapolationConfig:
    """Settings of one experiment (``full`` in ``backbones``: copied positions; ``multiples`` of the
    trained length L; ``finetune_steps`` 0: none). The fine-tune is AdamW at ``learning_rate`` with
    10 % linear warm-up, then linear decay; ``block_size`` None: the conversion's defaults; ``seed``
    sets masking, fine-tuning order and dropout. Raises UserError on impossible settings."""

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
        return {"bpc": nll / math.log(2) / bp, "unigram_bpc": unigram / bp, "masked_tokens": int(masked),
                "windows": count}

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
    """The experiment; returns the report (rows of backbone, stage, length, BPC). A source that is
    not a full-attention masked-LM model, a corpus of another tokenizer or without a test split, or
    an impossible conversion is a UserError."""
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
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"extrapolation.{suffix}" for suffix in ("json", "tsv", "md", "png")]
    atomic_write_text(paths[0], json.dumps(report, indent=2) + "\n")
    atomic_write_text(paths[1], tsv(report))
    atomic_write_text(paths[2], markdown_table(report))
    plot(report, paths[3])
    return paths


def tsv(report: dict[str, Any]) -> str:
    """One line per (backbone, stage, length)."""
    lines = ["\t".join(COLUMNS)]
    for row in report["rows"]:
        lines.append("\t".join(f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS))
    return "\n".join(lines) + "\n"


def markdown_table(report: dict[str, Any]) -> str:
    """Rows: the unigram baseline, the model at L, then each converted model per stage; columns: the
    lengths. Cells: BPC and, in brackets, BPC minus the unigram's on the same masked tokens (the
    masked tokens differ between lengths, so this difference is what compares across columns)."""
    lengths, rows, unigram = report["lengths"], report["rows"], report["unigram"]
    source = next(r for r in rows if r["stage"] == "trained")
    header = "| model | " + " | ".join(f"{n:,} tokens" for n in lengths) + " |"
    lines = [header, "|" + "---|" * (len(lengths) + 1)]
    lines.append("| token unigram | " + " | ".join(f"{unigram[n]:.3f}" for n in lengths) + " |")
    lines.append(f"| model at L (full, {lengths[0]:,} positions) | {source['bpc']:.3f} "
                 f"({source['bpc'] - unigram[lengths[0]]:+.3f}) |" + " |" * (len(lengths) - 1))
    for key in dict.fromkeys((r["backbone"], r["stage"]) for r in rows if r["stage"] != "trained"):
        cells = {r["length"]: r["bpc"] for r in rows if (r["backbone"], r["stage"]) == key}
        name = "full, copied positions" if key[0] == "full" else key[0]
        lines.append(f"| {name} ({key[1]}) | " + " | ".join(
            "" if n not in cells else f"{cells[n]:.3f} ({cells[n] - unigram[n]:+.3f})" for n in lengths) + " |")
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], png: Path) -> None:
    """BPC against input length per attention (solid: converted, dashed: after the fine-tune), the
    model at L (a point) and the unigram baseline (grey)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, lengths = report["rows"], report["lengths"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(lengths, [report["unigram"][n] for n in lengths], color="grey", ls=":", label="token unigram")
    colours = {}
    for backbone, stage in dict.fromkeys((r["backbone"], r["stage"]) for r in rows if r["stage"] != "trained"):
        points = [(r["length"], r["bpc"]) for r in rows if (r["backbone"], r["stage"]) == (backbone, stage)]
        line = ax.plot(*zip(*points, strict=True), marker="o", ls="-" if stage == "converted" else "--",
                       color=colours.get(backbone), label=f"{backbone} ({stage})")[0]
        colours[backbone] = line.get_color()
    source = next(r for r in rows if r["stage"] == "trained")
    ax.plot([source["length"]], [source["bpc"]], marker="*", ms=14, color="black", ls="", label="model at L")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [f"{n:,}" for n in lengths])
    ax.set(xlabel="input length (tokens)", ylabel="masked-token bits per bp (held-out)",
           title=f"extrapolation from {lengths[0]:,} trained positions")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
