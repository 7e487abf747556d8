"""The 919 DeepSEA profile names and classes (genolong/evaluation/profiles.py) against the real table."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from genolong.core.errors import InputError
from genolong.evaluation.profiles import (
    CLASS_COLUMNS,
    N_PROFILES,
    chromatin_profiles,
    default_table,
    load_profiles,
    profile_class,
    profile_classes,
)

HISTONE_MARK = re.compile(r"H[2-4][A-Za-z0-9]*")


def test_shipped_table_is_the_real_one(real_data):
    assert (
        default_table().read_bytes()
        == (real_data / "chromatin" / "deepsea_feature_name_epitome.tsv").read_bytes()
    )
    readme = (default_table().parent / "README.md").read_text()
    assert "YosefLab/epitome" in readme and "Apache" in readme


def test_classes_follow_deepsea_column_order():
    profiles = chromatin_profiles()
    assert len(profiles) == N_PROFILES and [p.index for p in profiles] == list(range(N_PROFILES))
    assert Counter(profile_classes()) == {"DHS": 125, "TF": 690, "HM": 104}
    assert [len(columns) for columns in CLASS_COLUMNS.values()] == [125, 690, 104]
    # The assays agree with the column ranges: DNase, then factors, then histone marks.
    assert {p.assay for p in profiles if p.profile_class == "DHS"} == {"DNase"}
    assert all(HISTONE_MARK.fullmatch(p.assay) for p in profiles if p.profile_class == "HM")
    assert not any(
        p.assay == "DNase" or HISTONE_MARK.fullmatch(p.assay) for p in profiles if p.profile_class == "TF"
    )


def test_known_rows():
    profiles = chromatin_profiles()
    first = profiles[0]
    assert (first.name, first.cell_type, first.assay, first.treatment) == (
        "8988T|DNase|None",
        "8988T",
        "DNase",
        "None",
    )
    assert profiles[125].name == "Dnd41|CTCF|None" and profiles[814].name == "WI-38|CTCF|None"
    assert profiles[815].name == "H1-hESC|H2AK5ac|None" and profiles[918].name == "Osteoblasts|H3K9me3|None"
    assert profiles[576].name == "NA|NA|NA" and profiles[576].profile_class == "TF"


def test_profile_class_bounds():
    assert [profile_class(i) for i in (0, 124, 125, 814, 815, 918)] == ["DHS", "DHS", "TF", "TF", "HM", "HM"]
    with pytest.raises(IndexError):
        profile_class(919)


def test_malformed_tables_are_rejected(tmp_path):
    lines = default_table().read_text().splitlines()
    cases = {
        "short.tsv": lines[:-1],
        "no_header.tsv": lines[1:],
        "two_parts.tsv": lines[:5] + ["5\tCell|DNase"] + lines[6:],
        "out_of_order.tsv": lines[:5] + [lines[6], lines[5]] + lines[7:],
    }
    for name, content in cases.items():
        (tmp_path / name).write_text("\n".join(content) + "\n")
        with pytest.raises(InputError):
            load_profiles(tmp_path / name)
