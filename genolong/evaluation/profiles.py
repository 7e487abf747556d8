"""The 919 DeepSEA chromatin profiles (Zhou & Troyanskaya 2015; BigBird App. F.3) in column order
(:data:`CLASS_COLUMNS`: DNase I hypersensitivity, TF binding, histone marks), named
``Cell|Assay|Treatment`` by the shipped copy of epitome's table (``genolong/resources/chromatin/``)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError

#: Number of DeepSEA chromatin profiles.
N_PROFILES = 919
#: Profile classes in DeepSEA column order, with their column ranges.
CLASS_COLUMNS = {"DHS": range(0, 125), "TF": range(125, 815), "HM": range(815, 919)}


@dataclass(frozen=True)
class ChromatinProfile:
    """One label column: its 0-based ``index``, ``name`` ``Cell|Assay|Treatment`` (e.g.
    ``8988T|DNase|None``) and its three parts, and ``profile_class`` (``DHS``, ``TF`` or ``HM``)."""

    index: int
    name: str
    cell_type: str
    assay: str
    treatment: str
    profile_class: str


def profile_class(index: int) -> str:
    """The class (``DHS``, ``TF``, ``HM``) of label column ``index``."""
    for name, columns in CLASS_COLUMNS.items():
        if index in columns:
            return name
    raise IndexError(f"label column {index} is outside 0..{N_PROFILES - 1}")


def default_table() -> Path:
    """The shipped table of profile names."""
    return Path(str(resources.files("genolong.resources") / "chromatin" / "deepsea_feature_name_epitome.tsv"))


def load_profiles(path: str | os.PathLike | None = None) -> tuple[ChromatinProfile, ...]:
    """The 919 profiles, in column order, of a table in epitome's format (``i\\tCell|Assay|Treatment``,
    header ``0\\t...``; the shipped one by default); an InputError for another number of rows,
    indices out of order, or a name without three parts."""
    path = Path(path) if path is not None else default_table()
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("0\t"):
        raise InputError(path, "expected a header line '0\\t<label>'", line=1)
    profiles = []
    for line_number, line in enumerate(lines[1:], start=2):
        number, _, name = line.partition("\t")
        parts = name.split("|")
        if number != str(line_number - 1) or len(parts) != 3:
            raise InputError(path, "expected '<index>\\tCell|Assay|Treatment' with consecutive indices",
                             line=line_number)
        index = line_number - 2
        if index >= N_PROFILES:
            raise InputError(path, f"more than {N_PROFILES} profiles", line=line_number)
        profiles.append(ChromatinProfile(index, name, *parts, profile_class(index)))
    if len(profiles) != N_PROFILES:
        raise InputError(path, f"{len(profiles)} profiles, expected {N_PROFILES}")
    return tuple(profiles)


@functools.cache
def chromatin_profiles() -> tuple[ChromatinProfile, ...]:
    """The 919 DeepSEA profiles in column order (shipped table, cached)."""
    return load_profiles()


def profile_classes() -> np.ndarray:
    """``(919,)`` array of class names (``DHS``/``TF``/``HM``) in column order."""
    return np.array([profile.profile_class for profile in chromatin_profiles()])
