"""Hand-made variant files on the shipped real hg19 sample genome (chr17 fragment + chrM)."""

from __future__ import annotations

from pathlib import Path

from Bio import bgzf

from genolong.dna.sequence import read_fasta
from genolong.resources import sample_genome

HEADER = [
    "##fileformat=VCFv4.2",
    "##contig=<ID=chr17_part,length=40000>",
    "##contig=<ID=chrM,length=16569>",
    "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO",
]


def genome_sequences() -> dict[str, str]:
    """The sample genome's records, read independently of genolong.dna.genome (uppercased)."""
    return {r.name: r.sequence for r in read_fasta(sample_genome())}


def other(base: str, step: int = 1) -> str:
    return "ACGT"[("ACGT".index(base) + step) % 4]


def site_records() -> list[tuple[str, int, str, str, str]]:
    """(chrom, pos, id, ref, alt) covering each case the scorer must handle."""
    g = genome_sequences()
    chr17, mt = g["chr17_part"], g["chrM"]
    return [
        ("chr17_part", 20001, "snv1", chr17[20000], other(chr17[20000])),
        ("chr17_part", 20101, "snv2", chr17[20100], other(chr17[20100], 2)),
        ("chr17_part", 20201, "mismatch", other(chr17[20200]), chr17[20200]),
        ("chr17_part", 21001, "ins", chr17[21000], chr17[21000] + "ACGT"),
        ("chr17_part", 22001, "del", chr17[22000:22004], chr17[22000]),
        ("chr17_part", 23001, "multi", chr17[23000], f"{other(chr17[23000])},{other(chr17[23000], 2)}"),
        ("chr17_part", 24001, "sym", chr17[24000], "<DEL>"),
        ("MT", 16559, "end", mt[16558], other(mt[16558])),  # 10 bp from the end, chr-less alias of chrM
        ("17_part", 25001, "chrless", chr17[25000], other(chr17[25000])),
    ]


def write_vcf(path: Path, records=None, header=HEADER) -> Path:
    lines = [*header] + [f"{c}\t{p}\t{i}\t{r}\t{a}\t.\t.\t." for c, p, i, r, a in (site_records() if records is None else records)]
    text = "\n".join(lines) + "\n"
    if path.name.endswith(".gz"):
        with bgzf.BgzfWriter(str(path), "wb") as out:
            out.write(text.encode())
    else:
        path.write_text(text)
    return path
