"""The README's "Genome tracks" figure: a `genolong scan` track next to annotated TSS positions.

The region is built from real sequences only, with known TSSs: 10 mouse TATA promoters from
DBTSS (``Mouse_tata_dbtss.fa``: windows -200..+50 around the TSS that DBTSS annotates, a source
the shipped model was not trained on) inserted every 2 kb into the first 21 kb of the real
*C. elegans* chrX (ce2). The TSS of each inserted promoter is its base 201 (1-based), by the
source's definition of the window; nothing else is annotated (C. elegans promoters of the
background are not marked).

Usage::

    python scripts/plot_scan_track.py --out docs/img/scan_track.png

Runs ``genolong scan`` (default promoter model, stride 50, + strand: the promoters are inserted forward) and plots the bigWig
with matplotlib; writes the BED of called regions and the TSS BED beside the PNG's work folder.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyBigWig  # noqa: E402

from genolong.classifier.directory import Classifier, default_promoter_model  # noqa: E402
from genolong.cli.main import main as genolong  # noqa: E402
from genolong.dna.genome import Genome  # noqa: E402
from genolong.dna.sequence import read_fasta, write_fasta  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SPACING, UPSTREAM, COUNT = 2_000, 200, 10


def mosaic(shared: Path) -> tuple[str, list[int]]:
    """Real background with real promoters inserted; returns the sequence and the TSS positions (0-based)."""
    background = next(Genome(shared / "genomes" / "ce2chrX.fa.gz").records()).sequence[: SPACING * (COUNT + 1)]
    promoters = [r.sequence for _, r in zip(range(COUNT), read_fasta(shared / "promoters" / "Mouse_tata_dbtss.fa"),
                                               strict=False)]
    pieces, tss, position = [], [], 0
    for i, promoter in enumerate(promoters):
        pieces.append(background[i * SPACING : (i + 1) * SPACING])
        position += SPACING
        tss.append(position + UPSTREAM)
        pieces.append(promoter)
        position += len(promoter)
    pieces.append(background[COUNT * SPACING :])
    return "".join(pieces), tss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img/scan_track.png"))
    parser.add_argument("--shared", type=Path, default=SHARED)
    args = parser.parse_args()
    sequence, tss = mosaic(args.shared)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_fasta(work / "mosaic.fa", [("mosaic", sequence)])
        track, called = work / "mosaic.bw", work / "mosaic.bed"
        assert genolong(["scan", "--genome", str(work / "mosaic.fa"), "--out", str(track), "--bed", str(called),
                         "--stride", "50"]) == 0
        with pyBigWig.open(str(track)) as bw:
            values = np.array(bw.values("mosaic", 0, len(sequence)))
        regions = [tuple(map(int, line.split("\t")[1:3])) for line in called.read_text().splitlines()]
    threshold = Classifier.load(default_promoter_model(), device="cpu").info.threshold
    figure, axis = plt.subplots(figsize=(10, 3.2))
    axis.plot(np.arange(len(values)) / 1000, values, lw=0.8, color="#1f77b4", label="promoter probability (+ strand)")
    axis.axhline(threshold, color="grey", ls="--", lw=0.8, label=f"model threshold {threshold:.2f}")
    for start, end in regions:
        axis.axvspan(start / 1000, end / 1000, ymin=0, ymax=0.04, color="#2ca02c")
    for i, position in enumerate(tss):
        axis.axvline(position / 1000, color="#d62728", lw=0.8, alpha=0.7, label="annotated TSS (DBTSS)" if i == 0 else None)
    axis.set(xlabel="position (kb)", ylabel="probability", ylim=(0, 1.02), xlim=(0, len(values) / 1000),
             title="genolong scan, default promoter model: real mouse TATA promoters (DBTSS) in C. elegans chrX")
    axis.legend(loc="upper right", fontsize=7, ncol=3)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=120)
    hits = sum(any(s <= t < e for s, e in regions) for t in tss)
    print(f"{args.out}: {len(regions)} called regions (green), {hits} of {len(tss)} TSSs inside one")


if __name__ == "__main__":
    main()
