"""Deduplication and train/valid/test splits for labelled sequences.

Identical sequences are collapsed *before* splitting; overlapping windows around alternative TSSs of
a gene can still fall in train and test of a random split, not of a :func:`chromosome_split`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from genolong.core.errors import ConfigError, UserError
from genolong.datasets.promoter import PromoterRecord

SPLITS = ("train", "valid", "test")


def deduplicate(records: Sequence[PromoterRecord]) -> tuple[list[PromoterRecord], Counter]:
    """Keep the first record of each distinct sequence (in input order), and none of a sequence seen
    with both labels; returns them and the dropped counts ``duplicate`` and ``conflicting_label``."""
    labels: dict[str, set[int]] = {}
    for record in records:
        labels.setdefault(record.sequence, set()).add(record.label)
    kept, seen, dropped = [], set(), Counter(duplicate=0, conflicting_label=0)
    for record in records:
        if len(labels[record.sequence]) > 1:
            dropped["conflicting_label"] += 1
        elif record.sequence in seen:
            dropped["duplicate"] += 1
        else:
            seen.add(record.sequence)
            kept.append(record)
    return kept, dropped


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Validate train/valid/test fractions: three positive numbers that sum to 1."""
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ConfigError(f"split fractions {list(fractions)} must be three positive numbers summing to 1, "
                          "e.g. 0.8,0.1,0.1")
    return tuple(float(f) for f in fractions)


def stratified_draw(strata: Sequence, fractions: Sequence[float], rng: np.random.Generator, *,
                    key=None) -> np.ndarray:
    """The part of each item, ``(N,)`` int64: per stratum (a label, a class, ``(source, label)``...; in
    ``sorted(..., key=key)`` order), a seeded shuffle of its ``n`` items gives the first
    ``round(n * fractions[0])`` part 1, the next ``round(n * fractions[1])`` part 2, ... the rest part 0."""
    parts = np.zeros(len(strata), dtype=np.int64)
    groups = defaultdict(list)  # stratum -> its items, in input order
    for i, stratum in enumerate(strata):
        groups[stratum].append(i)
    for value in sorted(groups, key=key):
        members = np.array(groups[value])
        order, start = members[rng.permutation(len(members))], 0
        for part, fraction in enumerate(fractions, start=1):
            count = round(len(members) * fraction)
            parts[order[start:start + count]] = part
            start += count
    return parts


def stratified_random_split(records: Sequence[PromoterRecord], fractions: Sequence[float],
                            rng: np.random.Generator) -> dict[str, list[PromoterRecord]]:
    """Split each label at ``fractions`` (train, valid, test) by :func:`stratified_draw`; each split holds
    its records by label, then in input order."""
    _, valid_fraction, test_fraction = check_fractions(fractions)
    parts = stratified_draw([r.label for r in records], (valid_fraction, test_fraction), rng)
    return {name: sorted((r for r, p in zip(records, parts, strict=True) if p == part), key=lambda r: r.label)
            for part, name in ((0, "train"), (1, "valid"), (2, "test"))}


def chromosome_split(records: Sequence[PromoterRecord], valid_chroms: Sequence[str],
                     test_chroms: Sequence[str]) -> dict[str, list[PromoterRecord]]:
    """Hold out whole chromosomes: ``valid_chroms`` -> valid, ``test_chroms`` -> test, rest -> train; an
    error for records without coordinates, a chromosome in both lists, or one no record is on."""
    if any(r.chrom is None for r in records):
        raise UserError("a chromosome split needs genomic coordinates; text and FASTA inputs have none",
                        hint="use --split random")
    both = set(valid_chroms) & set(test_chroms)
    if both:
        raise ConfigError(f"chromosomes {sorted(both)} are held out for both valid and test")
    present = {r.chrom for r in records}
    missing = [c for c in [*valid_chroms, *test_chroms] if c not in present]
    if missing:
        raise UserError(f"held-out chromosomes {missing} hold no example (examples are on {sorted(present)})")
    where = {**{c: "valid" for c in valid_chroms}, **{c: "test" for c in test_chroms}}
    splits = {name: [] for name in SPLITS}
    for record in records:
        splits[where.get(record.chrom, "train")].append(record)
    return splits
