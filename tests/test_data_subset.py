"""tests/data is what tests/data/make_subset.py cuts from the full data set, byte for byte."""

from __future__ import annotations

import runpy

import pytest

NOT_CUT = {"README.md", "make_subset.py"}


def files_under(root):
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file() and "__pycache__" not in path.parts}


@pytest.mark.slow  # reads ../shared/data, skipped without it (a few seconds)
def test_the_cut_files_are_rebuilt_byte_for_byte_from_the_full_set(real_data, shared_data, tmp_path):
    make_subset = runpy.run_path(str(real_data / "make_subset.py"))
    make_subset["main"](shared_data, tmp_path)
    assert files_under(tmp_path) == files_under(real_data) - NOT_CUT
    for name in files_under(tmp_path):
        assert (tmp_path / name).read_bytes() == (real_data / name).read_bytes(), name
