"""Promoter datasets split by SOURCE: train on some data sets, validate and test on others.

Every record of the spec's groups (:class:`SourceSplitConfig`) is tagged ``<group>/<file stem>``;
duplicates are dropped across all sources, held-out groups first (a shared sequence stays held out,
once); ``valid`` and ``test`` groups go whole to their split, ``train`` groups are split at random
(by source and label) into ``train`` and ``random_test``; each split derives its negatives from its
own promoters, so length alone never separates the classes within a source (251 or 300 bp).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from operator import attrgetter
from pathlib import Path

import numpy as np

from genolong import __version__
from genolong.config import from_dict, read_yaml
from genolong.configs import preset_path
from genolong.core.errors import ConfigError, UserError
from genolong.core.files import sha256_file
from genolong.datasets.promoter import FORMAT, SOURCE_COLUMNS, PromoterRecord
from genolong.dna.sequence import read_fasta, reverse_complement

from .negatives import DERIVED_METHODS, add_derived_negatives, draw_windows
from .promoter_dataset import label_counts, writable_dataset_dir, write_dataset
from .promoters import n_fraction, read_fasta_records, read_sequence_lines
from .splits import deduplicate, stratified_draw

ROLES = ("train", "valid", "test")
#: The splits of a held-out-source dataset; ``random_test`` is the random split of the train groups.
SOURCE_SPLITS = ("train", "valid", "test", "random_test")
_SPLIT_STREAM, _NEGATIVE_STREAM, _GENOME_STREAM, _ORDER_STREAM = range(4)


@dataclass
class SourceGroup:
    """One data set (files from one origin) and the split (``role``) it goes to: ``promoters`` (FASTA,
    or one sequence per line in ``.txt``), real ``non_promoters`` (FASTA), and a ``genome`` FASTA to
    draw ``genome_windows`` N-free windows of ``genome_window_bp`` from as genomic background."""

    name: str
    role: str
    promoters: list[str] = field(default_factory=list)
    non_promoters: list[str] = field(default_factory=list)
    genome: str | None = None
    genome_windows: int = 0
    genome_window_bp: int = 300

    def __post_init__(self):
        if self.role not in ROLES:
            raise ConfigError(f"source {self.name!r}: role {self.role!r} is not one of {', '.join(ROLES)}")
        if not (self.promoters or self.non_promoters or self.genome):
            raise ConfigError(f"source {self.name!r} names no file")
        if (self.genome is None) != (self.genome_windows == 0):
            raise ConfigError(f"source {self.name!r}: give genome and genome_windows > 0 together")


@dataclass
class SourceSplitConfig:
    """A held-out-source dataset: its groups (paths relative to ``root``), derived negatives, the
    in-source test fraction, the seed."""

    groups: list[SourceGroup]
    derived: list[str] = field(default_factory=lambda: ["substitution", "shuffle"])
    random_test_fraction: float = 0.1
    seed: int = 42
    root: str = "."

    def __post_init__(self):
        self.groups = [g if isinstance(g, SourceGroup) else from_dict(SourceGroup, g) for g in self.groups]
        unknown = sorted(set(self.derived) - set(DERIVED_METHODS))
        if unknown:
            raise ConfigError(
                f"unknown derived negatives {unknown}; choose from {', '.join(DERIVED_METHODS)}")
        roles = Counter(g.role for g in self.groups)
        if not roles["train"] or not roles["test"]:
            raise ConfigError("a held-out-source split needs at least one train and one test source")
        if len({g.name for g in self.groups}) < len(self.groups):
            raise ConfigError("source names must be unique")
        if not 0 < self.random_test_fraction < 1:
            raise ConfigError(f"random_test_fraction must lie in (0, 1), got {self.random_test_fraction}")

    def rng(self, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, stream])

    def path(self, name: str) -> Path:
        return Path(self.root) / name


def load_source_split_config(spec: str | Path, root: str | Path | None = None) -> SourceSplitConfig:
    """Read a YAML spec (a path, or a shipped one's name in ``configs/promoter_sources/``) whose paths
    resolve against ``root`` when given, else against its ``root`` key relative to its directory."""
    path = preset_path("promoter_sources", str(spec))
    data = read_yaml(path)
    data["root"] = str(root if root is not None else path.parent / data.get("root", "."))
    return from_dict(SourceSplitConfig, data, source=str(path))


def genome_windows(path: Path, count: int, length: int, rng: np.random.Generator) -> list[PromoterRecord]:
    """``count`` distinct random ``length``-bp windows of a genome without N (redrawn), on a random
    strand, starts uniform over all sequences; a UserError if too few are N-free."""
    chroms = {r.name: r.sequence.upper() for r in read_fasta(path) if len(r.sequence) >= length}
    if not chroms:
        raise UserError(f"{path}: no sequence of {length} bp or more for background windows")

    def fetch(name: str, start: int, end: int, strand: str) -> str:
        return chroms[name][start:end] if strand == "+" else reverse_complement(chroms[name][start:end])

    segments = [(name, 0, len(s) - length + 1) for name, s in chroms.items()]
    records, _ = draw_windows(segments, length, count, fetch, rng)
    if len(records) < count:
        raise UserError(f"{path}: found only {len(records)} of {count} N-free {length}-bp windows")
    return records


def read_group(group: SourceGroup, config: SourceSplitConfig) -> list[PromoterRecord]:

    def tagged(records: list[PromoterRecord], stem: str) -> list[PromoterRecord]:
        return [replace(r, id=f"{group.name}/{r.id}", source=f"{group.name}/{stem}") for r in records]

    records = []
    for name in group.promoters:
        path = config.path(name)
        read = read_sequence_lines if path.suffix == ".txt" else read_fasta_records
        records += tagged(read(path, 1), path.stem)
    for name in group.non_promoters:
        records += tagged(read_fasta_records(config.path(name), 0), config.path(name).stem)
    if group.genome is not None:
        path = config.path(group.genome)
        rng = np.random.default_rng([config.seed, _GENOME_STREAM, len(group.name), *group.name.encode()])
        windows = genome_windows(path, group.genome_windows, group.genome_window_bp, rng)
        records += tagged(windows, path.name.split(".")[0])
    return [r for r in records if n_fraction(r.sequence) == 0]


def split_by_source(config: SourceSplitConfig) -> tuple[dict[str, list[PromoterRecord]], Counter]:
    """The four splits (before derived negatives) and the deduplication counts."""
    by_role = {role: [r for g in config.groups if g.role == role for r in read_group(g, config)]
               for role in ROLES}
    records, dropped = deduplicate(by_role["test"] + by_role["valid"] + by_role["train"])
    kept = {id(r) for r in records}
    splits = {role: [r for r in by_role[role] if id(r) in kept] for role in ROLES}
    splits["train"], splits["random_test"] = _hold_out_at_random(splits["train"], config)
    return splits, dropped


def _hold_out_at_random(records: list[PromoterRecord],
                        config: SourceSplitConfig) -> tuple[list[PromoterRecord], list[PromoterRecord]]:
    """Per source and label, hold out a seeded ``random_test_fraction`` of the records (rounded); both
    lists hold their records by source and label, then in input order."""
    stratum = attrgetter("source", "label")
    parts = stratified_draw([stratum(r) for r in records], [config.random_test_fraction], config.rng(_SPLIT_STREAM))
    return tuple(sorted((r for r, p in zip(records, parts, strict=True) if p == part), key=stratum) for part in (0, 1))


def build_source_split_dataset(config: SourceSplitConfig, out_dir: str | Path, *,
                               overwrite: bool = False) -> dict:
    """Build the held-out-source dataset of ``config`` into ``out_dir`` (atomically); return its manifest."""
    out_dir = writable_dataset_dir(out_dir, overwrite)
    splits, dropped = split_by_source(config)
    dropped["derived_collision"] = add_derived_negatives(splits, config.derived, config.rng(_NEGATIVE_STREAM))
    for name, rows in splits.items():
        if {r.label for r in rows} != {0, 1}:
            raise UserError(f"split {name} needs promoters and non-promoters; check the roles of the sources")
    lengths = [len(r.sequence) for rows in splits.values() for r in rows]
    manifest = {
        "format": FORMAT, "genolong_version": __version__, "columns": list(SOURCE_COLUMNS),
        "sequence_length": max(lengths), "min_sequence_length": min(lengths),
        "sources": _source_files(config),
        "negatives": {"method": "+".join(["real", *config.derived]), "derived": list(config.derived)},
        "deduplication": dict(sorted(dropped.items())),
        "split": {"method": "source", "roles": {g.name: g.role for g in config.groups},
                  "random_test_fraction": config.random_test_fraction},
        "seed": config.seed, "counts": {name: label_counts(rows) for name, rows in splits.items()},
        "counts_by_source": {name: dict(sorted(Counter(r.source for r in rows).items()))
                             for name, rows in splits.items()},
    }
    write_dataset(out_dir, splits, manifest, config.rng(_ORDER_STREAM))
    return manifest


def _source_files(config: SourceSplitConfig) -> list[dict]:
    return [{"group": g.name, "role": g.role, "path": str(config.path(name).resolve()),
             "sha256": sha256_file(config.path(name))}
            for g in config.groups
            for name in [*g.promoters, *g.non_promoters, *([g.genome] if g.genome else [])]]
