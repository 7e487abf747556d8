"""``genolong benchmark`` without training: the leakage check on planted duplicates, the interval
over seeds, the layout readers on the fixtures of tests/data/benchmarks, and bad suites refused
in one line before any training."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml
from helpers.benchmark_suites import micro_model, refused, write_suite

from genolong.datasets.task import PROBLEM_TYPES, PreparedTask
from genolong.dna.genome import Genome
from genolong.dna.kmers import canonical_set
from genolong.dna.sequence import read_fasta, reverse_complement
from genolong.evaluation.leakage import LeakageSettings, find_leakage
from genolong.evaluation.metrics import mean_interval
from genolong.evaluation.task_metrics import METRICS, classification_metrics, task_metrics
from genolong.prep.benchmark_layouts import prepare_layout


def promoters(real_data, name: str) -> list[str]:
    return [r.sequence.upper() for r in read_fasta(real_data / "promoters" / name, raw=True, unique_names=False)]


def every_nth_changed(sequence: str, n: int) -> str:
    """``sequence`` with every ``n``-th base replaced by the next base in ACGT order."""
    following = {"A": "C", "C": "G", "G": "T", "T": "A"}
    return "".join(following[b] if i % n == 0 else b for i, b in enumerate(sequence))


def test_planted_exact_reverse_complement_and_near_duplicates_are_counted_exactly(real_data):
    tata = list(dict.fromkeys(promoters(real_data, "Mouse_tata.fa")))
    train, unseen = tata[:40], promoters(real_data, "Mouse_nonprom.fa")[:10]
    test = (train[:5]  # exact
            + [reverse_complement(s) for s in train[5:8]]  # reverse complement
            + [every_nth_changed(s, 40) for s in train[8:12]]  # near: 7 of 251 bases changed
            + [reverse_complement(every_nth_changed(train[12], 40))]  # near, on the other strand
            + [every_nth_changed(s, 5) for s in train[13:15]]  # a base in 5 changed: no 8-mer survives most windows
            + unseen)
    leakage = find_leakage(train, test, LeakageSettings(k=8, cut=0.5))
    assert leakage.counts() == {"exact": 5, "reverse_complement": 3, "near": 5, "leaked": 13}
    assert list(leakage.kind[:13]) == ["exact"] * 5 + ["reverse_complement"] * 3 + ["near"] * 5
    assert (leakage.max_jaccard[13:] < 0.5).all() and (leakage.max_jaccard[8:13] >= 0.5).all()
    assert leakage.max_jaccard[0] == 1.0
    # a stricter cut leaves the near copies out; exact and reverse-complement copies stay
    assert find_leakage(train, test, LeakageSettings(k=8, cut=0.99)).counts()["near"] == 0


def test_canonical_kmers_are_strand_free_and_skip_other_bases():
    assert canonical_set("ACGTN", 2).tolist() == [1, 6]  # AC = 1, CG = 6, GT -> its reverse complement AC; TN skipped
    assert np.array_equal(canonical_set("AACCGGTTAC", 4), canonical_set(reverse_complement("AACCGGTTAC"), 4))
    assert len(canonical_set("ACG", 4)) == 0


def test_the_interval_over_seeds_is_students_t():
    mean, half = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-6)  # t(0.975, 2) * sd 1 / sqrt 3
    assert np.isnan(mean_interval([0.7])[1]) and mean_interval([0.7])[0] == 0.7


def test_classification_metrics_of_hand_checked_rows():
    targets = np.array([[1], [1], [0], [0]], dtype=np.float32)
    metrics = classification_metrics("binary", targets, np.array([[0.9], [0.4], [0.6], [0.1]]), threshold=0.5)
    assert metrics == {"accuracy": 0.5, "f1": 0.5, "mcc": 0.0, "auroc": 0.75}
    three = classification_metrics("multiclass", np.array([[0], [1], [2]]), np.eye(3)[[0, 1, 1]] * 0.7 + 0.1)
    assert three["accuracy"] == pytest.approx(2 / 3) and three["auroc"] == pytest.approx(0.75)


def test_one_metrics_table_for_the_problem_types_of_task_datasets_and_benchmarks():
    assert tuple(METRICS) == PROBLEM_TYPES
    for problem_type, metrics in METRICS.items():  # the table's metrics are the ones computed
        targets = np.array([[0], [1], [1], [0]]) if problem_type != "multiclass" else np.array([[0], [1], [2], [1]])
        outputs = np.array([[0.2], [0.7], [0.4], [0.6]]) if problem_type != "multiclass" else np.eye(3)[[0, 1, 1, 2]]
        computed = task_metrics(problem_type, targets, outputs)
        assert {metrics.monitor, *metrics.shown} <= set(computed)
    # a benchmark run's metrics are the task metrics of the same calls
    targets, outputs = np.array([[0], [1], [2], [1]]), np.eye(3)[[0, 1, 1, 2]] * 0.7 + 0.1
    run, task = classification_metrics("multiclass", targets, outputs), task_metrics("multiclass", targets, outputs)
    assert (run["accuracy"], run["f1"], run["mcc"]) == (task["accuracy"], task["macro_f1"], task["mcc"])
    targets, outputs = np.array([[0], [1], [1], [0]]), np.array([[0.2], [0.7], [0.4], [0.6]])
    run, task = classification_metrics("binary", targets, outputs, 0.5), task_metrics("binary", targets, outputs, 0.5)
    assert (run["f1"], run["mcc"], run["auroc"]) == (task["f1"], task["mcc"], task["auroc"])


@pytest.mark.parametrize(("layout", "name", "rows"), [
    ("gue", "gue_mouse_tata", {"train": 24, "valid": 8, "test": 12}),
    ("nt", "nt_mouse_dbtss", {"train": 18, "valid": 6, "test": 12}),
    ("genomic_benchmarks", "gb_arabidopsis_tata", {"train": 18, "valid": 6, "test": 12}),
])
def test_each_layout_keeps_its_splits_and_draws_valid_from_train_when_it_has_none(real_data, tmp_path, layout, name,
                                                                                  rows):
    manifest = prepare_layout(layout, tmp_path / "data", path=real_data / "benchmarks" / name, valid_fraction=0.25)
    assert manifest["rows"] == rows and manifest["problem_type"] == "binary"
    assert manifest["class_counts"]["test"] == {c: 6 for c in manifest["classes"]}
    assert manifest["outputs"] == (["positive"] if layout == "genomic_benchmarks" else ["label"])
    test = PreparedTask(tmp_path / "data")["test"]
    first_positive = promoters(real_data, {"gue": "Mouse_tata.fa", "nt": "Mouse_tata_dbtss.fa",
                                           "genomic_benchmarks": "Arabidopsis_tata.fa"}[layout])[12 + 4 * (layout == "gue")]
    assert first_positive in test.sequences and test.values[test.sequences.index(first_positive), 0] == 1


def test_nt_parquet_and_genomic_benchmarks_coordinates(real_data, tmp_path):
    import pyarrow.parquet as pq

    from genolong.datasets.table_files import arrow_table

    nt = tmp_path / "nt"
    nt.mkdir()
    for split in ("train", "test"):
        pq.write_table(arrow_table(real_data / "benchmarks" / "nt_mouse_dbtss" / split), nt / f"{split}.parquet")
    assert prepare_layout("nt", tmp_path / "a", path=nt)["rows"] == {"train": 22, "valid": 2, "test": 12}
    genome_path = real_data / "genomes" / "yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa"
    with Genome(genome_path) as genome:
        chrom = next(iter(genome.chromosomes))
        expected = reverse_complement(genome.fetch(chrom, 1000, 1100).upper())
    root = tmp_path / "gb"
    for split in ("train", "test"):
        for label, offset in (("positive", 0), ("negative", 50_000)):
            (root / split).mkdir(parents=True, exist_ok=True)
            lines = [f"{label}{i},{chrom},{offset + 1000 + 200 * i},{offset + 1100 + 200 * i},{'-' if i == 0 else '+'}"
                     for i in range(8 if split == "train" else 3)]
            (root / split / f"{label}.csv").write_text("id,region,start,end,strand\n" + "\n".join(lines) + "\n")
    manifest = prepare_layout("genomic_benchmarks_csv", tmp_path / "b", path=root, genome=genome_path)
    assert manifest["rows"] == {"train": 14, "valid": 2, "test": 6} and manifest["outputs"] == ["positive"]
    train = PreparedTask(tmp_path / "b")["train"]
    assert train.sequences[train.ids.index("positive0")] == expected  # minus strand: reverse complement


def test_bad_suites_are_refused_in_one_line_before_any_training(real_data, tmp_path, capsys):
    gue = {"name": "gue", "layout": "gue", "path": str(real_data / "benchmarks" / "gue_mouse_tata")}
    out = str(tmp_path / "out")
    line = refused(["benchmark", write_suite(tmp_path / "a.yaml", [gue | {"layout": "gu"}]), "--out", out], capsys)
    assert "unknown layout 'gu' (did you mean gue?)" in line
    line = refused(["benchmark", write_suite(tmp_path / "b.yaml", [gue], seeds=[0, 1, 0]), "--out", out], capsys)
    assert "seeds must differ; repeated: 0" in line
    no_dev = tmp_path / "no_dev"
    shutil.copytree(real_data / "benchmarks" / "gue_mouse_tata", no_dev)
    (no_dev / "dev.csv").unlink()
    line = refused(["benchmark", write_suite(tmp_path / "c.yaml", [gue | {"path": str(no_dev)}]), "--out", out], capsys)
    assert "dev.csv" in line and "missing: the valid split" in line
    three = tmp_path / "three.csv"
    tata = promoters(real_data, "Mouse_tata.fa")[:30]
    three.write_text("sequence,label\n" + "".join(f"{s},{'abc'[i % 3]}\n" for i, s in enumerate(tata)))
    suite = tmp_path / "d.yaml"
    suite.write_text(yaml.safe_dump({"tasks": [{"name": "three", "layout": "csv", "path": str(three)}],
                                     "models": [micro_model(positive_label_weight=3.0)]}))
    line = refused(["benchmark", str(suite), "--out", out], capsys)
    assert "model micro cannot serve task three (multiclass)" in line and "positive_label_weight" in line
    assert not (tmp_path / "out").exists()  # nothing trained, nothing left


def test_a_rerun_with_another_suite_is_refused(real_data, tmp_path, capsys):
    out = tmp_path / "out"
    (out / "tasks").mkdir(parents=True)
    (out / ".genolong-run.json").write_text(json.dumps({"kind": "benchmark", "genolong": "0"}))
    (out / "suite.yaml").write_text("tasks: []\n")
    gue = {"name": "gue", "layout": "gue", "path": str(real_data / "benchmarks" / "gue_mouse_tata")}
    line = refused(["benchmark", write_suite(tmp_path / "a.yaml", [gue]), "--out", str(out)], capsys)
    assert "holds a benchmark of another suite" in line


def test_the_notebook_reads_a_results_table(tmp_path):
    from helpers.notebooks import run_notebook

    from genolong.experiments.suites.report import COLUMNS, _csv

    rows = [{"task": "gue", "model": "k-mer", "mode": "-", "seed": "", "metric": "mcc", "value": 0.5, "accuracy": 0.7,
             "f1": 0.6, "mcc": 0.5, "auroc": 0.8, "value_without_leaked": 0.4, "auroc_without_leaked": 0.75,
             "test_rows": 10, "test_rows_without_leaked": 8, "steps": ""}]
    rows += [rows[0] | {"model": "bigbird", "mode": "full", "seed": seed, "value": value, "steps": 3}
             for seed, value in ((0, 0.6), (1, 0.7), (2, 0.8))]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.csv").write_text(_csv(rows, COLUMNS))
    text = run_notebook("benchmark_results.ipynb", {"GENOLONG_BENCHMARK_DIR": str(tmp_path / "run"),
                                                    "GENOLONG_FIGURES": str(tmp_path / "figures")}, tmp_path)
    assert "bigbird (full)" in text and "0.700   0.248" in text  # mean 0.7, t(0.975, 2) * 0.1 / sqrt 3
    assert "4 rows, 1 tasks, 2 models and modes" in text and (tmp_path / "figures" / "benchmark_seeds.png").is_file()
