"""Build and write a promoter dataset directory (its reader: :mod:`genolong.datasets.promoter`).

:func:`build_promoter_dataset` reads the positives and any independent negatives, requires one
length, drops duplicate sequences (and those seen with both labels), splits, then derives negatives
*per split* from that split's promoters (so a negative shares its promoter's split). The manifest
records sources (sha256), window, negatives, split, seed and counts, for rebuilding and audits.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong import __version__
from genolong.core.errors import ConfigError, UserError
from genolong.core.files import atomic_path, mark_directory, sha256_file
from genolong.datasets.promoter import COLUMNS, FORMAT, MANIFEST, SOURCE_COLUMNS, PromoterRecord
from genolong.dna.genome import Genome

from .negatives import (
    DERIVED_METHODS,
    KEPT_PIECES,
    NEGATIVE_METHODS,
    NUM_PIECES,
    add_derived_negatives,
    sample_genomic_negatives,
)
from .promoters import (
    WINDOW_PRESETS,
    TssWindow,
    cut_tss_windows,
    n_fraction,
    read_fasta_records,
    read_sequence_lines,
    read_tss_bed,
)
from .splits import check_fractions, chromosome_split, deduplicate, stratified_random_split

# Independent random streams, so that changing one step never reshuffles another.
_SPLIT_STREAM, _NEGATIVE_STREAM, _GENOMIC_STREAM, _ORDER_STREAM = range(4)


@dataclass
class PromoterDatasetConfig:
    """What to build, validated on construction: one positive source (``tss_bed`` with ``genome``,
    ``text`` or ``fasta``); options left at ``None`` take their default where they apply (``window``
    DeePromoter's, ``per_positive`` 1, ``min_tss_distance`` 10,000 bp, ``fractions`` 0.8/0.1/0.1) and
    are an error where they do not. ``max_n_fraction``: windows with more ``N`` are skipped (positives)
    or redrawn; ``seed``: every random step derives its generator from it."""

    tss_bed: Path | None = None
    genome: Path | None = None
    text: Path | None = None
    fasta: Path | None = None
    window: TssWindow | None = None
    negatives: str = "substitution"
    negative_fasta: Path | None = None
    per_positive: int | None = None
    min_tss_distance: int | None = None
    max_n_fraction: float = 0.0
    split: str = "random"
    fractions: tuple[float, float, float] | None = None
    valid_chroms: tuple[str, ...] = ()
    test_chroms: tuple[str, ...] = ()
    seed: int = 42

    def __post_init__(self):
        from_genome = self.tss_bed is not None or self.genome is not None
        if sum([from_genome, self.text is not None, self.fasta is not None]) != 1:
            raise ConfigError("give exactly one positive source: --tss with --genome, --text, or --fasta")
        if from_genome and (self.tss_bed is None or self.genome is None):
            raise ConfigError("TSS windows need both --tss BED and --genome FASTA")
        if self.negatives not in NEGATIVE_METHODS:
            raise ConfigError(
                f"unknown negative method {self.negatives!r}; choose from {', '.join(NEGATIVE_METHODS)}")
        if self.negatives == "genomic" and not from_genome:
            raise ConfigError("genomic negatives need --tss and --genome (to know where the TSSs are)")
        if self.split not in ("random", "chromosome"):
            raise ConfigError(f"unknown split {self.split!r}; choose random or chromosome")
        self.window = _applies("--window", self.window, from_genome, "with --tss",
                               WINDOW_PRESETS["deepromoter"])
        self.negative_fasta = _applies("--negative-fasta", self.negative_fasta, self.negatives == "fasta",
                                       "with --negatives fasta", None)
        if self.negatives == "fasta" and self.negative_fasta is None:
            raise ConfigError("--negatives fasta needs --negative-fasta FILE")
        self.per_positive = _applies("--per-positive", self.per_positive, self.negatives != "fasta",
                                     "with substitution, shuffle or genomic negatives", 1)
        self.min_tss_distance = _applies("--min-tss-distance", self.min_tss_distance,
                                         self.negatives == "genomic", "with --negatives genomic", 10_000)
        self.fractions = _applies("--fractions", self.fractions, self.split == "random",
                                  "with --split random", (0.8, 0.1, 0.1))
        for option, chroms in (("--valid-chroms", self.valid_chroms), ("--test-chroms", self.test_chroms)):
            if self.split == "chromosome" and not chroms:
                raise ConfigError(f"a chromosome split needs {option}")
            _applies(option, chroms or None, self.split == "chromosome", "with --split chromosome", None)
        if self.per_positive is not None and self.per_positive < 1:
            raise ConfigError(f"--per-positive must be >= 1, got {self.per_positive}")
        if self.min_tss_distance is not None and self.min_tss_distance < 1:
            raise ConfigError(f"--min-tss-distance must be >= 1 bp, got {self.min_tss_distance}")
        if not 0 <= self.max_n_fraction <= 1:
            raise ConfigError(f"--max-n-fraction must lie in [0, 1], got {self.max_n_fraction}")
        if self.fractions is not None:
            self.fractions = check_fractions(self.fractions)

    def rng(self, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, stream])


def _applies(option: str, value, applies: bool, where: str, default):
    """``value`` (``default`` for ``None``) where the option applies; else ``None``, or an error if given."""
    if not applies:
        if value is not None:
            raise ConfigError(f"{option} applies only {where}")
        return None
    return default if value is None else value


def build_promoter_dataset(config: PromoterDatasetConfig, out_dir: str | Path, *,
                           overwrite: bool = False) -> dict:
    """Build the dataset described by ``config`` into ``out_dir`` (atomically); return its manifest."""
    out_dir = writable_dataset_dir(out_dir, overwrite)
    with contextlib.ExitStack() as stack:
        genome = sites = None
        if config.genome is not None:
            sites = read_tss_bed(config.tss_bed)
            genome = stack.enter_context(Genome(config.genome))
        positives, positive_info = _read_positives(config, genome, sites)
        independent, negative_info = _read_independent_negatives(config, genome, sites, len(positives))
        length = _common_length(positives + independent, config)
        records, dropped = deduplicate(positives + independent)
        splits = _split(config, records, genome)
    if config.negatives in DERIVED_METHODS:
        dropped["derived_collision"] = add_derived_negatives(splits, [config.negatives], config.rng(_NEGATIVE_STREAM),
                                                              config.per_positive)
    manifest = {"format": FORMAT, "genolong_version": __version__, "columns": list(COLUMNS),
                "sequence_length": length, "sources": _sources(config), "positives": positive_info,
                "negatives": negative_info, "max_n_fraction": config.max_n_fraction,
                "deduplication": dict(sorted(dropped.items())), "split": _split_info(config),
                "seed": config.seed, "counts": {name: label_counts(rows) for name, rows in splits.items()}}
    lacking = {name: counts for name, counts in manifest["counts"].items() if 0 in counts.values()}
    if lacking:
        raise UserError(f"the dataset would have splits without promoters or without non-promoters: {lacking} "
                        f"(after removing {sum(dropped.values())} duplicate or colliding sequences)",
                        hint="give more (distinct) sequences, or change the split fractions")
    write_dataset(out_dir, splits, manifest, config.rng(_ORDER_STREAM))
    return manifest


def writable_dataset_dir(out_dir: str | Path, overwrite: bool) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise UserError(f"{out_dir} already exists", hint="pass --overwrite to replace it")
    return out_dir


def write_dataset(out_dir: Path, splits: dict[str, list[PromoterRecord]], manifest: dict,
                  order: np.random.Generator) -> None:
    """Write every split's TSV (rows in a random ``order``), the manifest and the run marker, atomically."""
    with atomic_path(out_dir, directory=True) as tmp:
        for name, rows in splits.items():
            write_split_tsv(tmp / f"{name}.tsv", [rows[i] for i in order.permutation(len(rows))])
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        mark_directory(tmp, "promoter-data")


def _read_positives(config, genome, sites) -> tuple[list[PromoterRecord], dict]:
    if genome is not None:
        records, skipped = cut_tss_windows(genome, sites, config.window, max_n_fraction=config.max_n_fraction)
        if not records:
            raise UserError(
                f"no usable TSS window: {len(sites)} TSSs in {config.tss_bed}, skipped {dict(skipped)}")
        window = {"start": config.window.start, "end": config.window.end, "length": config.window.length,
                  "tss_column": -config.window.start}
        return records, {"source": "tss_bed", "tss_read": len(sites), "window": window, "kept": len(records),
                         "skipped": dict(sorted(skipped.items()))}
    if config.text is not None:
        records, source = read_sequence_lines(config.text, 1), "text"
    else:
        records, source = read_fasta_records(config.fasta, 1), "fasta"
    kept = [r for r in records if n_fraction(r.sequence) <= config.max_n_fraction]
    skipped = {"too_many_n": len(records) - len(kept)} if len(kept) < len(records) else {}
    if not kept:
        raise UserError(f"every positive has more than {config.max_n_fraction:.0%} N",
                        hint="raise --max-n-fraction")
    return kept, {"source": source, "read": len(records), "kept": len(kept), "skipped": skipped}


def _read_independent_negatives(config, genome, sites, n_positives: int) -> tuple[list[PromoterRecord], dict]:
    info = {"method": config.negatives}
    if config.negatives in DERIVED_METHODS:
        info.update(per_positive=config.per_positive, pieces=NUM_PIECES, kept_pieces=KEPT_PIECES)
        return [], info
    if config.negatives == "genomic":
        records, rejected = sample_genomic_negatives(genome, sites, config.window.length,
                                                     config.per_positive * n_positives,
                                                     min_distance=config.min_tss_distance,
                                                     rng=config.rng(_GENOMIC_STREAM),
                                                     max_n_fraction=config.max_n_fraction)
        info.update(per_positive=config.per_positive, min_tss_distance=config.min_tss_distance,
                    strand="uniform random, minus strand reverse-complemented",
                    redrawn=dict(sorted(rejected.items())))
        return records, info
    records = read_fasta_records(config.negative_fasta, 0)
    kept = [r for r in records if n_fraction(r.sequence) <= config.max_n_fraction]
    info.update(read=len(records), skipped_too_many_n=len(records) - len(kept))
    return kept, info


def _common_length(records: list[PromoterRecord], config: PromoterDatasetConfig) -> int:
    """The one sequence length of the dataset; a different length is an error naming the record."""
    length = len(records[0].sequence)
    for record in records:
        if len(record.sequence) != length:
            raise UserError(
                f"record {record.id!r} is {len(record.sequence)} bp but {records[0].id!r} is {length} bp; "
                "a promoter dataset needs one length (else length alone separates the classes)",
                hint="trim or filter the inputs to one length")
    if config.negatives in DERIVED_METHODS and length < NUM_PIECES:
        raise UserError(
            f"sequences of {length} bp are too short to cut into {NUM_PIECES} pieces for negatives")
    return length


def _split(config, records, genome) -> dict[str, list[PromoterRecord]]:
    if config.split == "random":
        return stratified_random_split(records, config.fractions, config.rng(_SPLIT_STREAM))
    resolve = genome.resolve if genome is not None else str
    return chromosome_split(records, [resolve(c) for c in config.valid_chroms],
                            [resolve(c) for c in config.test_chroms])


def _split_info(config) -> dict:
    if config.split == "random":
        return {"method": "random", "stratified_by": "label", "fractions": list(config.fractions)}
    return {"method": "chromosome", "valid_chroms": list(config.valid_chroms),
            "test_chroms": list(config.test_chroms)}


def _sources(config) -> list[dict]:
    roles = [("tss_bed", config.tss_bed), ("genome", config.genome), ("positives_text", config.text),
             ("positives_fasta", config.fasta), ("negatives_fasta", config.negative_fasta)]
    return [{"role": role, "path": str(Path(path).resolve()), "sha256": sha256_file(path)}
            for role, path in roles if path is not None]


def label_counts(rows: list[PromoterRecord]) -> dict[str, int]:
    counts = Counter(r.label for r in rows)
    return {"0": counts[0], "1": counts[1]}


def write_split_tsv(path: Path, rows: list[PromoterRecord]) -> None:
    """Write one split; the ``source`` column is added when any record has a source."""
    with_source = any(r.source is not None for r in rows)
    with open(path, "w") as out:
        out.write("\t".join(SOURCE_COLUMNS if with_source else COLUMNS) + "\n")
        for r in rows:
            fields = [r.id, r.chrom, r.start, r.end, r.strand, r.label, r.sequence]
            fields += [r.source] if with_source else []
            out.write("\t".join("." if value is None else str(value) for value in fields) + "\n")
