"""``genolong task prepare``: every input kind, the problem types, splits, leakage removal and
one-line errors (file and row, exit 2, nothing written)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.cli import one_line
from helpers.task_prepare import prepare, random_sequences, write_csv

from genolong.cli.main import main
from genolong.datasets.task import PreparedTask
from genolong.dna.sequence import reverse_complement
from genolong.prep.task_dataset import infer_problem_type


def test_two_fasta_files_make_a_binary_task_whose_first_class_is_positive(tmp_path, real_data):
    promoters = real_data / "promoters"
    code, task = prepare(tmp_path, "--class", f"tata={promoters / 'Mouse_tata.fa'}",
                         "--class", f"other={promoters / 'Mouse_nonprom.fa'}", "--seed", 3)
    assert code == 0 and task.problem_type == "binary" and task.outputs == ["tata"]
    rows = task.manifest["rows"]
    counts = task.manifest["class_counts"]
    removed = sum(sum(c.values()) for c in task.manifest["leakage"]["removed"].values())
    copies = task.manifest["duplicates"]["splits"]["all"]
    assert sum(rows.values()) + removed + copies["repeated"] + copies["conflicting"] == 304 + 302
    assert counts["valid"]["tata"] + removed >= round(304 * 0.1) >= counts["valid"]["tata"]  # stratified
    train = task["train"]
    assert train.targets().shape == (rows["train"], 1) and set(np.unique(train.targets())) == {0.0, 1.0}
    assert all(set(s) <= set("ACGTNRYSWKMBDHV") for s in train.sequences)


def test_given_csv_splits_with_three_classes_are_kept_and_leakage_is_removed(tmp_path):
    seqs = random_sequences(30, 40, seed=1)
    labels = ["cat", "dog", "emu"] * 10
    train = write_csv(tmp_path / "train.csv", ["sequence", "label"], list(zip(seqs[:18], labels[:18], strict=True)))
    dev_rows = list(zip(seqs[18:24], labels[18:24], strict=True)) + [(reverse_complement(seqs[0]), "cat")]
    dev = write_csv(tmp_path / "dev.csv", ["sequence", "label"], dev_rows)
    test_rows = list(zip(seqs[24:], labels[24:], strict=True)) + [(seqs[1], "dog"), (seqs[18], "cat")]
    test = write_csv(tmp_path / "test.csv", ["sequence", "label"], test_rows)
    code, task = prepare(tmp_path, "--table", f"train={train}", "--table", f"dev={dev}", "--table", f"test={test}")
    assert code == 0 and task.problem_type == "multiclass" and task.outputs == ["cat", "dog", "emu"]
    assert task.manifest["split"]["method"] == "given"
    assert task.manifest["rows"] == {"train": 18, "valid": 6, "test": 6}
    assert task.manifest["leakage"]["removed"] == {"valid": {"exact": 0, "reverse_complement": 1},
                                                  "test": {"exact": 2, "reverse_complement": 0}}
    assert task["valid"].sequences == seqs[18:24]
    assert task["train"].targets()[:6, 0].tolist() == [0, 1, 2, 0, 1, 2]


def test_parquet_and_a_save_to_disk_directory_read_as_the_csv_does(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    seqs = random_sequences(20, 30, seed=2)
    table = pa.table({"seq": seqs, "a": [0, 1] * 10, "b": [1, 1, 0, 0] * 5})
    pq.write_table(table, tmp_path / "rows.parquet")
    saved = tmp_path / "saved"
    saved.mkdir()
    with pa.ipc.new_stream(saved / "data-00000-of-00001.arrow", table.schema) as writer:
        writer.write_table(table)
    (saved / "state.json").write_text("{}")
    manifests = []
    for source in (tmp_path / "rows.parquet", saved):
        out = tmp_path / f"out_{source.stem}"
        assert main(["task", "prepare", "--table", str(source), "--seed", "1", "--out", str(out)]) == 0
        task = PreparedTask(out)
        manifests.append((task.problem_type, task.outputs, task.manifest["rows"], task["train"].sequences))
    assert manifests[0] == manifests[1] and manifests[0][:2] == ("multilabel", ["a", "b"])


def test_the_gena_lm_deepsea_csv_is_a_919_label_task(tmp_path, real_data):
    code, task = prepare(tmp_path, "--table", real_data / "chromatin" / "gena_lm_deepsea_test.dataset.csv.gz",
                         "--no-header")
    assert code == 0 and task.problem_type == "multilabel" and len(task.outputs) == 919
    assert sum(task.manifest["rows"].values()) == 100
    targets = np.concatenate([task[name].targets() for name in task.splits])
    assert targets.shape == (100, 919) and targets.sum() == 1571
    assert {len(s) for s in task["train"].sequences} == {8000}


def test_bed_regions_with_two_scores_are_a_regression_task_split_by_chromosome(tmp_path, real_data):
    genome = tmp_path / "genome.fa"
    chr17 = (real_data / "genomes" / "chr17.hg19.part.fa").read_text().split("\n", 1)[1].replace("\n", "")
    genome.write_text(f">chrA\n{chr17[:20000]}\n>chrB\n{chr17[20000:]}\n")
    lines = [f"chr{c}\t{s}\t{s + 50}\tpeak{i}\t0\t+\t{i * 0.5}\t{i % 3}\t1\t-1"
             for i, (c, s) in enumerate([("A", 1000 + 900 * k) for k in range(12)] + [("B", 500 + 1500 * k) for k in range(6)])]
    bed = tmp_path / "peaks.narrowPeak"
    bed.write_text("\n".join(lines) + "\n")
    code, task = prepare(tmp_path, "--regions", bed, "--genome", genome, "--window", 200, "--label-column", "signalValue",
                         "--label-column", "pValue", "--split", "chromosome", "--valid-chroms", "chrB")
    assert code == 0 and task.problem_type == "regression" and task.outputs == ["signalValue", "pValue"]
    assert task.manifest["rows"] == {"train": 12, "valid": 6}
    assert task["train"].sequences[0] == chr17[925:1125].upper()  # centred on the region's midpoint, 200 bp
    assert task["valid"].targets()[1].tolist() == [6.5, 1.0]


def test_background_windows_keep_their_distance_from_every_region(tmp_path, real_data):
    genome = real_data / "genomes" / "chr17.hg19.part.fa"
    starts = [2000, 9000, 15000, 30000]
    bed = tmp_path / "regions.bed"
    bed.write_text("".join(f"chr17\t{s}\t{s + 100}\n" for s in starts))
    code, task = prepare(tmp_path, "--regions", bed, "--genome", genome, "--window", 100, "--background", 2,
                         "--background-distance", 3000, "--fractions", "0.5,0.25,0.25")
    assert code == 0 and task.problem_type == "binary" and task.outputs == ["region"]
    ids = [i for name in task.splits for i in task[name].ids if i.startswith("background")]
    assert len(ids) == 8
    centres = [int(i.rsplit(":", 1)[1]) for i in ids]
    assert all(c < s - 3000 or c >= s + 100 + 3000 for c in centres for s in starts)


@pytest.mark.parametrize(("problem", "columns", "expected"), [
    ("two names", [(["a", "b", "a"], False)], "binary"),
    ("0/1", [([0.0, 1.0, 1.0], True)], "binary"),
    ("names", [(["a", "b", "c"], False)], "multiclass"),
    ("0..2", [([0.0, 1.0, 2.0, 1.0], True)], "multiclass"),
    ("gapped integers", [([0.0, 2.0, 3.0], True)], "regression"),
    ("reals", [([0.5, 1.0, 2.0], True)], "regression"),
    ("several 0/1", [([0.0, 1.0], True), ([1.0, 1.0], True)], "multilabel"),
    ("several reals", [([0.0, 1.0], True), ([1.5, 1.0], True)], "regression"),
])
def test_the_problem_type_is_inferred_from_the_labels(problem, columns, expected):
    assert infer_problem_type(columns) == expected, problem


@pytest.mark.parametrize(("rows", "argv", "needles"), [
    ([("ACGT", "1"), ("ACGA", "0")] * 3, ["--label-column", "score"], ["no column 'score'"]),
    ([("ACGT", "1"), ("ACGA", "x"), ("ACGG", "0")] * 3, [], ["mixes types", ":3:"]),
    ([("ACGT", "1"), ("ACXA", "0")] * 3, [], ["invalid character 'X'", ":3:"]),
    ([(s, "ab"[i % 2]) for i, s in enumerate(random_sequences(6, 12, seed=5))] + [("AAAA", "c")], [],
     ["class 'c' has a single example", ":8:"]),
])
def test_bad_tables_are_one_line_naming_file_and_row_and_write_nothing(tmp_path, capsys, rows, argv, needles):
    table = write_csv(tmp_path / "rows.csv", ["sequence", "label"], rows)
    code, _ = prepare(tmp_path, "--table", table, *argv)
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "rows.csv", *needles)


def test_a_bed_region_off_the_chromosome_is_one_line_naming_its_line(tmp_path, capsys, real_data):
    bed = tmp_path / "regions.bed"
    bed.write_text("chr17\t100\t200\nchr17\t39950\t40100\n")
    code, _ = prepare(tmp_path, "--regions", bed, "--genome", real_data / "genomes" / "chr17.hg19.part.fa",
                      "--window", 100)
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "regions.bed:2", "off the chromosome")


def test_the_manifest_records_inputs_by_checksum(tmp_path):
    table = write_csv(tmp_path / "rows.tsv", ["id", "sequence", "y"],
                      [(f"r{i}", s, i * 0.1) for i, s in enumerate(random_sequences(20, 20, seed=4))], sep="\t")
    code, task = prepare(tmp_path, "--table", table)
    assert code == 0 and task.problem_type == "regression"
    manifest = json.loads((tmp_path / "task" / "manifest.json").read_text())
    assert len(manifest["inputs"][0]["files"][0]["sha256"]) == 64
    assert task["train"].ids[0].startswith("r")
