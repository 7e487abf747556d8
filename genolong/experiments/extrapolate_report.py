"""The extrapolation experiment's outputs: a TSV of every measurement, the Markdown table (LSG's
Table 1 for DNA: BPC per attention and length, with its difference to the token-unigram baseline
on the same masked tokens) and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genolong.core.files import atomic_path

COLUMNS = ("backbone", "stage", "length", "bpc", "unigram_bpc", "masked_tokens", "windows")


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
