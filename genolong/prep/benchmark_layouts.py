"""The layouts benchmark suites come in, read into a prepared task directory with their splits kept:
``gue`` (DNABERT-2's GUE, :func:`read_gue`), ``nt`` (Nucleotide Transformer, :func:`read_nt`; a
``validation`` / ``dev`` split is used when present), ``genomic_benchmarks`` and
``genomic_benchmarks_csv`` (coordinates: 0-based, end exclusive, ``-`` the reverse complement, on a
genome FASTA), ``fasta`` (a file per class) and ``csv`` (``sequence,label``), both split at random.
A layout without a validation split gets ``valid_fraction`` of each class of train (``split_seed``).
Leakage and copies are counted and kept (a benchmark reports them); a missing split is one line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError
from genolong.datasets.task_inputs import Row, check_sequence, read_class_fastas, read_table
from genolong.dna.genome import Genome
from genolong.dna.sequence import open_text_or_gzip, reverse_complement
from genolong.prep.splits import stratified_draw
from genolong.prep.task_dataset import SplitPlan, prepare_task

#: The label column every layout's rows carry.
LABEL = ["label"]


def _table_split(path: Path, split: str) -> list[Row]:
    if not path.exists():
        raise InputError(path, f"missing: the {split} split of this layout")
    return read_table(path, sequence_column="sequence", label_columns=LABEL, split=split)[0]


def read_gue(path: Path) -> list[Row]:
    """A GUE task folder: ``train.csv``, ``dev.csv`` (the validation split), ``test.csv``."""
    return [row for name, split in (("train", "train"), ("dev", "valid"), ("test", "test"))
            for row in _table_split(path / f"{name}.csv", split)]


def read_nt(path: Path) -> list[Row]:
    """An NT downstream task: a ``save_to_disk`` DatasetDict directory or Parquet per split."""
    rows = []
    for names, split in ((("train",), "train"), (("validation", "dev", "valid"), "valid"), (("test",), "test")):
        found = [p for n in names for p in (path / n, path / f"{n}.parquet") if p.exists()]
        if not found and split != "valid":
            raise InputError(path / names[0], f"missing: the {split} split (a save_to_disk directory or {names[0]}.parquet)")
        rows += _table_split(found[0], split) if found else []
    return rows


def read_genomic_benchmarks(path: Path) -> list[Row]:
    """Genomic Benchmarks' folders: ``<split>/<class>/<n>.txt``, one sequence per file (in number order)."""
    rows = []
    for split in ("train", "test"):
        split_dir = path / split
        classes = sorted((p.name, p) for p in split_dir.iterdir() if p.is_dir()) if split_dir.is_dir() else []
        if not classes:
            raise InputError(split_dir, f"missing: the {split} split (a folder per class)")
        for label, folder in classes:
            files = sorted(folder.glob("*.txt"), key=lambda p: (len(p.stem), p.stem))
            if not files:
                raise InputError(folder, "no .txt sequence files in this class folder")
            for file in files:
                sequence = check_sequence(file.read_text().strip(), file, 1)
                rows.append(Row(f"{label}/{file.stem}", sequence, (label,), (file, 1), split=split))
    return rows


def read_genomic_benchmarks_csv(path: Path, genome_path: Path) -> list[Row]:
    """Genomic Benchmarks' coordinates: ``<split>/<class>.csv[.gz]`` (``id,region,start,end,strand``) on a genome."""
    rows = []
    with Genome(genome_path) as genome:
        for split in ("train", "test"):
            tables = sorted(p for p in (path / split).glob("*.csv*")) if (path / split).is_dir() else []
            if not tables:
                raise InputError(path / split, f"missing: the {split} split (one <class>.csv per class)")
            for table in tables:
                label = table.name.split(".")[0]
                rows += _coordinate_rows(table, label, split, genome)
    return rows


def _coordinate_rows(table: Path, label: str, split: str, genome: Genome) -> list[Row]:
    with open_text_or_gzip(table) as handle:
        lines = handle.read().decode("utf-8").splitlines()
    header = lines[0].split(",") if lines else []
    if not {"region", "start", "end", "strand"} <= set(header):
        raise InputError(table, f"columns are {header}; expected id,region,start,end,strand", line=1)
    at = {name: header.index(name) for name in header}
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(",")
        try:
            chrom, start, end = genome.resolve(fields[at["region"]]), int(fields[at["start"]]), int(fields[at["end"]])
        except (ValueError, IndexError) as err:
            raise InputError(table, f"not a region line ({err})", line=number) from None
        if not 0 <= start < end <= genome.chromosomes[chrom]:
            raise InputError(table, f"{chrom}:{start}-{end} is off the chromosome", line=number)
        sequence = genome.fetch(chrom, start, end).upper()
        if fields[at["strand"]] == "-":
            sequence = reverse_complement(sequence)
        record = fields[at["id"]] if "id" in at else f"{label}{number}"
        rows.append(Row(record, sequence, (label,), (table, number), chrom=chrom, split=split))
    return rows


def stratified_split(rows: list[Row], fractions: dict[str, float], seed: int, rest: str) -> list[Row]:
    """``rows`` with their split set: per class, a seeded random ``fractions[split]`` of the rows go
    to each named split, the others to ``rest``."""
    parts = stratified_draw([row.labels for row in rows], list(fractions.values()), np.random.default_rng(seed), key=str)
    names = [rest, *fractions]
    return [replace(row, split=names[part]) for row, part in zip(rows, parts, strict=True)]


def subsample(rows: list[Row], max_rows: dict[str, int], seed: int) -> list[Row]:
    """At most ``max_rows[split]`` rows of each split, drawn with ``seed``, in their order."""
    rng = np.random.default_rng(seed)
    keep = np.ones(len(rows), dtype=bool)
    for split, limit in sorted(max_rows.items()):
        members = np.flatnonzero([row.split == split for row in rows])
        if len(members) > limit:
            keep[rng.choice(members, len(members) - limit, replace=False)] = False
    return [row for row, kept in zip(rows, keep, strict=True) if kept]


def prepare_layout(layout: str, out: Path, *, path: Path | None = None, classes: dict[str, Path] | None = None,
                   genome: Path | None = None, positive: str | None = None,
                   fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), valid_fraction: float = 0.1,
                   split_seed: int = 0, max_rows: dict[str, int] | None = None) -> dict:
    """Read a dataset in ``layout`` and write the prepared task ``out``; returns its manifest (the
    arguments are :class:`genolong.experiments.suites.suite.TaskEntry`'s)."""
    class_order = None
    if layout == "fasta":
        rows, _ = read_class_fastas(list(classes.items()))
        class_order, inputs = list(classes), list(classes.values())
    elif layout == "csv":
        rows, inputs = read_table(path, sequence_column="sequence", label_columns=LABEL)[0], [path]
    else:
        readers = {"gue": read_gue, "nt": read_nt, "genomic_benchmarks": read_genomic_benchmarks,
                   "genomic_benchmarks_csv": lambda p: read_genomic_benchmarks_csv(p, genome)}
        rows, inputs = readers[layout](path), [path] + ([genome] if genome else [])
    if layout in ("fasta", "csv"):
        rows = stratified_split(rows, {"valid": fractions[1], "test": fractions[2]}, split_seed, "train")
    elif not any(row.split == "valid" for row in rows):
        train = [row for row in rows if row.split == "train"]
        rows = stratified_split(train, {"valid": valid_fraction}, split_seed, "train") + [
            row for row in rows if row.split != "train"]
    rows = subsample(rows, max_rows or {}, split_seed)
    if positive is None and any(row.labels == ("positive",) for row in rows):
        positive = "positive"
    options = {"layout": layout, "fractions": list(fractions), "valid_fraction": valid_fraction,
               "split_seed": split_seed, "max_rows": dict(max_rows or {})}
    return prepare_task(rows, ["class"] if layout == "fasta" else LABEL, out, inputs=inputs, plan=SplitPlan("given"),
                        positive=positive, class_order=class_order, options=options, duplicates="keep",
                        drop_leakage=False)
