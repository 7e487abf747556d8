"""Rebuild tests/data from the full real data set: python tests/data/make_subset.py [SOURCE [OUT]]

SOURCE defaults to ../shared/data (beside the repository), OUT to this directory.

Every output is real bytes of a source file: small files are copied whole, FASTA and text files
are cut at record or line boundaries, and the GENA-LM tokenizer is stored xz-compressed; the
benchmark tasks in ``benchmarks/`` hold sequences of the cut promoter files in the layouts
benchmark suites are downloaded in. The
outputs keep the source's relative paths, so a spec written against the full directory (e.g.
configs/promoter_sources/default.yaml) runs against this one too. Deterministic: running it
twice gives identical files (gzip with mtime 0, xz without timestamps).
"""

from __future__ import annotations

import gzip
import lzma
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[2] / "shared" / "data"

WHOLE = [
    "genomes/chr17.hg19.part.fa",
    "genomes/MT-human_NC_012920.1.fa",
    "chromatin/gena_lm_deepsea_test.dataset.csv.gz",
    "chromatin/deepsea_feature_name_epitome.tsv",
    "checkpoints/gena_lm/tokenizer_t2t_1000h_multi_32k/tokenizer_config.json",
    "checkpoints/gena_lm/tokenizer_t2t_1000h_multi_32k/special_tokens_map.json",
    "promoters/README",
]
WHOLE_DIRECTORIES = ["checkpoints/gena_lm/configs", "LICENSES"]
XZ = ["checkpoints/gena_lm/tokenizer_t2t_1000h_multi_32k/tokenizer.json"]
GENOME_PREFIX_BP = {  # the first lines of a one-record genome that hold at least N bp
    "genomes/ce2chrX.fa.gz": 150_000,
    "genomes/yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa": 100_000,
}
FIRST_LINES = {"promoters/mm_pos_TATA.txt": 300}
FIRST_RECORDS = {  # name: (first N records, also every record whose sequence repeats in the file)
    "promoters/Mouse_tata.fa": (300, True),
    "promoters/Mouse_nonprom.fa": (300, True),
    "promoters/Mouse_tata_dbtss.fa": (40, False),
    "promoters/Arabidopsis_tata.fa": (40, False),
    "promoters/Arabidopsis_non_tata.fa": (40, False),
    "promoters/Arabidopsis_non_prom.fa": (40, False),
}


def fasta_records(text: str) -> list[str]:
    """The records of a FASTA text, each as its original lines (header included)."""
    chunks = text.removesuffix("\n").split("\n>")
    return [(chunk if index == 0 else ">" + chunk) + "\n" for index, chunk in enumerate(chunks)]


def sequence_of(record: str) -> str:
    """A FASTA record's sequence, uppercase (the key under which a data set builder finds duplicates)."""
    return "".join(record.splitlines()[1:]).upper()


def first_records(text: str, count: int, with_duplicates: bool) -> str:
    """The first ``count`` records, plus (in file order) every record whose sequence occurs twice or more."""
    records = fasta_records(text)
    repeats = Counter(map(sequence_of, records))
    keep = [
        record
        for index, record in enumerate(records)
        if index < count or (with_duplicates and repeats[sequence_of(record)] > 1)
    ]
    return "".join(keep)


def genome_prefix(path: Path, length: int) -> bytes:
    """The header and the first lines of a one-record FASTA (plain or gzip) holding at least ``length`` bp."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        kept, bases = [next(handle)], 0
        while bases < length:
            kept.append(next(handle))
            bases += len(kept[-1].strip())
    return "".join(kept).encode()


#: Benchmark layouts made from the cut promoter sets: name -> (layout, positive FASTA, negative FASTA,
#: first negative record); each takes per class 12 train, 4 dev (GUE only) and 6 test records, in file order.
BENCHMARKS = {
    "gue_mouse_tata": ("gue", "promoters/Mouse_tata.fa", "promoters/Mouse_nonprom.fa", 0),
    "nt_mouse_dbtss": ("nt", "promoters/Mouse_tata_dbtss.fa", "promoters/Mouse_nonprom.fa", 22),
    "gb_arabidopsis_tata": ("genomic_benchmarks", "promoters/Arabidopsis_tata.fa",
                            "promoters/Arabidopsis_non_prom.fa", 0),
}
SPLIT_SIZES = {"gue": (("train", 12), ("dev", 4), ("test", 6)), "nt": (("train", 12), ("test", 6)),
               "genomic_benchmarks": (("train", 12), ("test", 6))}


def write_benchmark(out: Path, layout: str, positives: list[str], negatives: list[str]) -> None:
    """One task in ``layout`` (GUE CSV folder, NT save_to_disk directory, Genomic Benchmarks folders)."""
    import pyarrow as pa

    start = 0
    for split, count in SPLIT_SIZES[layout]:
        rows = [(s, label) for pair in zip(positives[start:start + count], negatives[start:start + count], strict=True)
                for s, label in zip(pair, (1, 0), strict=True)]
        start += count
        if layout == "gue":
            write(out / f"{split}.csv", ("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows)).encode())
        elif layout == "nt":
            table = pa.table({"sequence": [s for s, _ in rows], "label": pa.array([y for _, y in rows], pa.int64())})
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            write(out / split / "data-00000-of-00001.arrow", sink.getvalue().to_pybytes())
        else:
            for index, (s, y) in enumerate(rows):
                write(out / split / ("positive" if y else "negative") / f"{index // 2}.txt", s.encode())
    if layout == "nt":
        write(out / "dataset_dict.json", b'{"splits": ["train", "test"]}')


def write(path: Path, data: bytes) -> None:
    """``data`` into ``path``, its directories made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def main(source: Path, out: Path = HERE) -> None:
    """Every file of tests/data (README.md and this script aside), cut from ``source`` into ``out``."""
    for name in WHOLE:
        write(out / name, (source / name).read_bytes())
    for directory in WHOLE_DIRECTORIES:
        for path in sorted((source / directory).iterdir()):
            write(out / directory / path.name, path.read_bytes())
    for name in XZ:
        write(out / f"{name}.xz", lzma.compress((source / name).read_bytes(), preset=9 | lzma.PRESET_EXTREME))
    for name, length in GENOME_PREFIX_BP.items():
        prefix = genome_prefix(source / name, length)
        write(out / name, gzip.compress(prefix, compresslevel=9, mtime=0) if name.endswith(".gz") else prefix)
    for name, count in FIRST_LINES.items():
        lines = (source / name).read_text().splitlines(keepends=True)
        write(out / name, "".join(lines[:count]).encode())
    for name, (count, with_duplicates) in FIRST_RECORDS.items():
        write(out / name, first_records((source / name).read_text(), count, with_duplicates).encode())
    for name, (layout, positive, negative, first) in BENCHMARKS.items():
        positives = [sequence_of(r) for r in fasta_records((out / positive).read_text())]
        negatives = [sequence_of(r) for r in fasta_records((out / negative).read_text())][first:]
        write_benchmark(out / "benchmarks" / name, layout, positives, negatives)


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:3] or [DEFAULT_SOURCE]))
