"""Tables and plots of a backbone comparison and of the context-length ablation, written as CSV,
markdown and PNG files for :mod:`genolong.experiments.compare`; ``notebooks/compare_backbones.ipynb``
redraws everything from the CSV files with the readers and plots here."""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path
from typing import Any

from genolong.core.files import atomic_path, atomic_write_text

#: comparison.csv columns.
COLUMNS = ("backbone", "parameters", "max_len", "pretrain_steps", "train_tokens_per_s", "train_peak_mb",
           "val_bpc", "unigram_bpc", "finetune_steps", "promoter_f1", "promoter_auroc", "promoter_mcc",
           "kmer_f1", "infer_windows_per_s", "pretrain_s", "finetune_s", "device")
#: context_ablation.csv columns. ``gain_bpc`` = unigram_bpc - val_bpc: bits per bp the model saves
#: over the token unigram on the same masked tokens (less sensitive to which tokens a length masks).
ABLATION_COLUMNS = ("backbone", "max_len", "batch_size", "steps", "tokens_seen", "val_bpc", "unigram_bpc",
                    "gain_bpc", "train_tokens_per_s", "pretrain_s", "device")
#: comparison_curves.csv and context_ablation_curves.csv columns.
CURVE_COLUMNS = ("run", "backbone", "max_len", "step", "tokens_seen", "val_bpc")


def write_csv(path: Path, rows: list[dict[str, Any]], columns) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: "" if row.get(k) is None else row[k] for k in columns} for row in rows)


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a CSV written here, numbers parsed (int, float; empty -> None)."""

    def parse(value: str) -> Any:
        if value == "":
            return None
        for kind in (int, float):
            with contextlib.suppress(ValueError):
                return kind(value)
        return value

    with open(path, newline="") as handle:
        return [{key: parse(value) for key, value in row.items()} for row in csv.DictReader(handle)]


def markdown_table(rows: list[dict[str, Any]], columns) -> str:
    """A GitHub markdown table: floats below 10 (BPC, F1) with 4 decimals, below 1,000 with 1,
    larger ones as integers with thousands separators; missing values as ``-``."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}" if abs(value) < 1000 else f"{value:,.0f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, png: Path | None) -> None:
    if png is not None:
        with atomic_path(png) as tmp:
            fig.savefig(tmp, format="png", dpi=100)


def plot_comparison(rows: list[dict], curves: list[dict], png_curves: Path | None = None,
                    png_scatter: Path | None = None):
    """Two figures: validation BPC against step for every backbone (the token unigram dashed),
    and quality against speed (BPC and promoter F1 against training tokens/s). Returns them."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    fig_curves, ax = plt.subplots(figsize=(6.5, 4.2))
    for row in rows:
        points = [c for c in curves if c["run"] == row["backbone"]]
        ax.plot([c["step"] for c in points], [c["val_bpc"] for c in points], marker="o", ms=3,
                label=row["backbone"])
    if rows and rows[0].get("unigram_bpc") is not None:
        ax.axhline(rows[0]["unigram_bpc"], color="grey", ls="--", lw=1, label="token unigram")
    ax.set(xlabel="pretraining step", ylabel="validation bits per bp", title="MLM pretraining, every backbone")
    ax.legend(fontsize=8)
    fig_curves.tight_layout()
    _save(fig_curves, png_curves)

    fig_scatter, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in zip(axes, ("val_bpc", "promoter_f1"), ("validation bits per bp (lower is better)",
                                                                  "promoter test F1 (higher is better)"), strict=True):
        for row in rows:
            if row.get(key) is None or row.get("train_tokens_per_s") is None:
                continue
            ax.scatter(row["train_tokens_per_s"], row[key], s=40)
            ax.annotate(row["backbone"], (row["train_tokens_per_s"], row[key]), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)
        ax.set(xlabel="training throughput (tokens/s)", ylabel=label)
        ax.xaxis.set_major_locator(MaxNLocator(5))
    kmer = [row["kmer_f1"] for row in rows if row.get("kmer_f1") is not None]
    if kmer:
        axes[1].axhline(kmer[0], color="grey", ls="--", lw=1, label="k-mer baseline")
        axes[1].legend(fontsize=8)
    fig_scatter.suptitle("quality against speed")
    fig_scatter.tight_layout()
    _save(fig_scatter, png_scatter)
    return fig_curves, fig_scatter


def plot_context_ablation(rows: list[dict], curves: list[dict], png: Path | None = None):
    """Left: ``gain_bpc`` against context length per backbone (each length validates on its own windows;
    the gain corrects for how hard those were). Right: validation BPC against tokens seen per run."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for backbone in dict.fromkeys(row["backbone"] for row in rows):
        chosen = sorted((r for r in rows if r["backbone"] == backbone), key=lambda r: r["max_len"])
        left.plot([r["max_len"] for r in chosen], [r["gain_bpc"] for r in chosen], marker="o", label=backbone)
        for r in chosen:
            points = [c for c in curves if c["run"] == f"{backbone}_{r['max_len']}"]
            right.plot([c["tokens_seen"] for c in points], [c["val_bpc"] for c in points], marker="o", ms=3,
                       label=f"{backbone} {r['max_len']}")
    left.set_xscale("log", base=2)
    left.set(xlabel="context length (tokens)", ylabel="bits per bp saved over the token unigram",
             title="equal tokens seen (higher is better)")
    right.set(xlabel="training tokens seen", ylabel="validation bits per bp", title="learning curves")
    for ax in (left, right):
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, png)
    return fig


def write_comparison(out: Path, rows: list[dict[str, Any]], curves: list[dict[str, Any]]) -> None:
    """comparison.csv, comparison.md, comparison_curves.csv, bpc_vs_step.png, quality_vs_speed.png."""
    write_csv(out / "comparison.csv", rows, COLUMNS)
    write_csv(out / "comparison_curves.csv", curves, CURVE_COLUMNS)
    atomic_write_text(out / "comparison.md", markdown_table(rows, COLUMNS))
    plot_comparison(rows, curves, out / "bpc_vs_step.png", out / "quality_vs_speed.png")
    _pyplot().close("all")


def write_ablation(out: Path, rows: list[dict[str, Any]], curves: list[dict[str, Any]]) -> None:
    """context_ablation.csv, context_ablation.md, context_ablation_curves.csv, context_ablation.png."""
    write_csv(out / "context_ablation.csv", rows, ABLATION_COLUMNS)
    write_csv(out / "context_ablation_curves.csv", curves, CURVE_COLUMNS)
    atomic_write_text(out / "context_ablation.md", markdown_table(rows, ABLATION_COLUMNS))
    plot_context_ablation(rows, curves, out / "context_ablation.png")
    _pyplot().close("all")
