"""The prediction tables (genolong/inference/predict/writers.py) on hand-checked records: rows, skipped records,
merged BED regions, and outputs that appear only when complete."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from genolong.classifier.records import Skipped, Window
from genolong.inference.predict.writers import (
    PredictionCounts,
    Table,
    open_outputs,
    write_chromatin_table,
    write_promoter_tables,
)


def _records():
    """Record ``a`` (300 bp): windows 0-100 (0.9), 50-150 (0.7), 100-200 (0.2), 200-300 (0.6);
    record ``b`` (40 bp): too short."""
    scores = [(0, 0.9), (50, 0.7), (100, 0.2), (200, 0.6)]
    windows = [(Window(0, "a", 300, start, start + 100, "", 4), np.array([p], dtype=np.float32)) for start, p in scores]
    return [(windows[0][0], iter(windows)), (Skipped(1, "b", 40, "shorter than 50 bp"), iter(()))]


def test_promoter_tables_by_hand():
    out, windows, bed = io.StringIO(), io.StringIO(), io.StringIO()
    counts = write_promoter_tables(_records(), 0.5, "# model m\n", Table(out), windows=Table(windows), bed=bed,
                                   strand="+")
    # called: windows 0-100, 50-150 and 200-300 reach 0.5, so 150 + 100 bp of record a's 300
    assert counts == PredictionCounts(records=2, windows=4, skipped=1, promoters=1, scored_bp=300, called_bp=250)
    assert out.getvalue() == (
        "# model m\n# record: 1-based position of the record in the FASTA\n"
        "record\tid\tlength\twindows\tprobability\tlabel\terror\n"
        "1\ta\t300\t4\t0.9000\t1\t\n"
        "2\tb\t40\t0\t\t\tshorter than 50 bp\n"
    )
    assert windows.getvalue().splitlines()[2:] == [
        "record\tid\tlength\twindows\tstart\tend\tprobability\tlabel",
        "1\ta\t300\t4\t0\t100\t0.9000\t1", "1\ta\t300\t4\t50\t150\t0.7000\t1",
        "1\ta\t300\t4\t100\t200\t0.2000\t0", "1\ta\t300\t4\t200\t300\t0.6000\t1",
    ]
    # 0-100 and 50-150 overlap: one region with the best score; 100-200 is below the threshold
    assert bed.getvalue() == "a\t0\t150\tpromoter\t900\t+\na\t200\t300\tpromoter\t600\t+\n"


def test_promoter_table_alone_and_a_record_below_the_threshold():
    out = io.StringIO()
    counts = write_promoter_tables(_records(), 0.95, "# m\n", Table(out))
    assert counts.promoters == 0
    assert out.getvalue().splitlines()[3] == "1\ta\t300\t4\t0.9000\t0\t"


def test_chromatin_table_by_hand():
    window = Window(0, "r", 1000, 0, 1000, "", 1)
    records = [(window, iter([(window, np.array([0.25, 1.0]))])), (Skipped(1, "s", 3, "too short"), iter(()))]
    out = io.StringIO()
    counts = write_chromatin_table(records, ["K562|CTCF|None", "HeLa|DNase|None"], Table(out))
    assert counts == PredictionCounts(records=2, windows=1, skipped=1)
    assert out.getvalue() == (
        "record\tid\tlength\twindows\tstart\tend\tK562|CTCF|None\tHeLa|DNase|None\terror\n"
        "1\tr\t1000\t1\t0\t1000\t0.2500\t1.0000\t\n"
        "2\ts\t3\t0\t\t\t\t\ttoo short\n"
    )
    assert all(line.count("\t") == 8 for line in out.getvalue().splitlines())


def test_repeated_ids_are_told_apart_by_the_record_ordinal():
    windows = [Window(index, "dup", 100, 0, 100, "", 1) for index in range(3)]
    records = [(w, iter([(w, np.array([0.1 * (i + 1)], dtype=np.float32))])) for i, w in enumerate(windows)]
    out = io.StringIO()
    write_promoter_tables(records, 0.5, "# m\n", Table(out))
    rows = [line.split("\t") for line in out.getvalue().splitlines()[3:]]
    assert [(row[0], row[1], row[4]) for row in rows] == [("1", "dup", "0.1000"), ("2", "dup", "0.2000"),
                                                           ("3", "dup", "0.3000")]


def test_outputs_appear_only_when_complete(tmp_path):
    path = tmp_path / "out.tsv"
    with pytest.raises(RuntimeError), open_outputs(path) as (handle,):
        handle.write("partial\n")
        raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []
    with open_outputs(path, None) as (handle, stdout):
        handle.write("done\n")
        assert not path.exists()
    assert path.read_text() == "done\n" and stdout is sys.stdout
