"""Reading the TSV files the prediction commands write."""

from __future__ import annotations

import csv


# -- the command ------------------------------------------------------------------------------
def read_tsv(path):
    """The rows of a predict-promoter TSV, after its '#' lines naming the model and threshold and saying
    what the record column holds."""
    with open(path, newline="") as handle:
        assert handle.readline().startswith("# model ")
        assert handle.readline() == "# record: 1-based position of the record in the FASTA\n"
        return list(csv.DictReader(handle, delimiter="\t"))
