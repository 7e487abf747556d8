"""Chromatin fine-tuning, `genolong chromatin eval` and `genolong chromatin predict` end to end on the
100 real DeepSEA rows: 8,000-bp windows (located in a synthetic genome) and the central 1,000 bp."""

from __future__ import annotations

import csv
import shutil
from dataclasses import replace

import numpy as np
import pytest
from helpers.classify import (
    chromatin_prepared,
    finetuned_chromatin,
    random_classifier,
    real_deepsea_fastas,
    tiny_tokenizer,
)
from helpers.deepsea import real_rows
from sklearn.metrics import average_precision_score, roc_auc_score

from genolong.classifier.directory import Classifier, StrandAveraged
from genolong.classifier.task_info import TaskInfo
from genolong.cli.main import main
from genolong.core.errors import InputError
from genolong.datasets.chromatin import PreparedChromatin
from genolong.dna.sequence import write_fasta
from genolong.evaluation.chromatin import AUC_COLUMNS, evaluation_rows, read_auc_table
from genolong.evaluation.metrics import per_profile_auc
from genolong.evaluation.profiles import chromatin_profiles
from genolong.tasks.task import get_task


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("chromatin")


@pytest.fixture(scope="module")
def prepared_1000(real_data, work):
    return chromatin_prepared(real_data, work / "p1000", context=None)


@pytest.fixture(scope="module")
def micro_run(real_data, tmp_path_factory):
    """The 8-kb prepared directory of the real rows and a micro model fine-tuned on it."""
    return finetuned_chromatin(real_data, tmp_path_factory)


@pytest.fixture(scope="module")
def prepared_8000(micro_run):
    return micro_run[0]


@pytest.fixture(scope="module")
def finetuned(micro_run):
    return micro_run[1], micro_run[2]


def test_fine_tuning_writes_the_model_and_aucs(finetuned, prepared_8000):
    out, report = finetuned
    assert report["monitor"]["metric"] == "val/mean_auc" and 0 <= report["monitor"]["best"] <= 1
    classifier = Classifier.load(out / "model", task="chromatin", device="cpu")
    info = classifier.info
    assert (info.window_bp, info.min_bp, info.threshold) == (8000, 1000, None)
    assert info.label_names == [p.name for p in chromatin_profiles()]
    assert classifier.model.config.positive_label_weight == 8.0  # BigBird App. F.3, from the preset

    table = read_auc_table(out / "aucs.csv")
    test = PreparedChromatin(prepared_8000)["test"]
    labels = np.asarray(test.labels)
    positives = labels.sum(0)
    assert (table.positives == positives).all() and report["test"]["rows"] == len(test) == 200
    assert (~np.isnan(table.roc_auc) == ((positives > 0) & (positives < 200))).all()
    scores = classifier.probabilities([test.sequence(row) for row in range(len(test))])
    expected = per_profile_auc(labels, scores)
    np.testing.assert_allclose(table.roc_auc, expected.roc_auc, atol=1e-6)
    np.testing.assert_allclose(table.pr_auc, expected.pr_auc, atol=1e-6)


def test_vectorized_aucs_equal_sklearn_on_the_real_labels(real_data):
    _, labels = real_rows(real_data)
    labels = labels[:, ::4]  # 230 profiles of every class: scikit-learn takes ~10 ms per profile
    rng = np.random.default_rng(0)
    for scores in (rng.integers(0, 5, labels.shape).astype(float), rng.random(labels.shape)):  # ties, none
        fast = per_profile_auc(labels, scores, chunk_elements=5000)
        defined = (labels.sum(0) > 0) & (labels.sum(0) < len(labels))
        assert (fast.positives == labels.sum(0)).all() and (fast.defined == defined).all()
        assert np.isnan(fast.roc_auc[~defined]).all() and np.isnan(fast.pr_auc[~defined]).all()
        for column in np.flatnonzero(defined):
            y, s = labels[:, column], scores[:, column]
            assert fast.roc_auc[column] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert fast.pr_auc[column] == pytest.approx(average_precision_score(y, s), abs=1e-12)
    hand = per_profile_auc([[0], [1], [0], [1]], [[0.1], [0.9], [0.35], [0.3]])
    assert hand.roc_auc[0] == pytest.approx(0.75)  # 3 of 4 (positive, negative) pairs ordered
    assert hand.pr_auc[0] == pytest.approx((1 + 2 / 3) / 2)  # precision 1 at 0.9, 2/3 at 0.3
    tied = per_profile_auc([[1], [0], [1], [0]], [[0.5], [0.5], [0.5], [0.1]])
    assert tied.roc_auc[0] == pytest.approx(0.75) and tied.pr_auc[0] == pytest.approx(2 / 3)


def read_tsv(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle, delimiter="\t"))


def test_predict_chromatin_on_the_real_8kb_and_1kb_sequences(finetuned, real_data, tmp_path, capsys):
    out, _ = finetuned
    long_fasta, short_fasta = real_deepsea_fastas(real_data, tmp_path)
    classifier = Classifier.load(out / "model", device="cpu")
    names = [p.name for p in chromatin_profiles()]
    windows, labels = real_rows(real_data)
    for fasta, sequences in ((long_fasta, windows), (short_fasta, [w[3500:4500] for w in windows])):
        preds = tmp_path / f"{fasta.stem}.tsv"
        assert (
            main(
                [
                    "chromatin",
                    "predict",
                    str(fasta),
                    "--model",
                    str(out / "model"),
                    "--out",
                    str(preds),
                    "--batch-size",
                    "16",
                ]
            )
            == 0
        )
        header, *rows = read_tsv(preds)
        assert header == ["record", "id", "length", "windows", "start", "end", *names, "error"]
        assert [(r[0], r[1]) for r in rows] == [(str(i + 1), f"row{i}") for i in range(100)]
        assert {(r[2], r[3], r[4], r[5], r[-1]) for r in rows} == {
            (str(len(sequences[0])), "1", "0", str(len(sequences[0])), "")
        }
        predicted = np.array([[float(v) for v in r[6:-1]] for r in rows])
        np.testing.assert_allclose(predicted, classifier.probabilities(sequences), atol=6e-5)
        # per-profile AUCs exist for the profiles with positives among the 100 rows
        aucs = per_profile_auc(labels, predicted)
        assert (
            aucs.defined == ((labels.sum(0) > 0) & (labels.sum(0) < 100))
        ).all() and aucs.defined.sum() > 100
    assert "100 records, 100 windows scored" in capsys.readouterr().err


def test_predict_chromatin_scans_long_records_and_flags_short_ones(finetuned, real_data, tmp_path):
    out, _ = finetuned
    windows, _ = real_rows(real_data)
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, [("joined", windows[0] + windows[1][:1000]), ("short", windows[2][:999])])
    preds = tmp_path / "preds.tsv"
    assert (
        main(
            [
                "chromatin",
                "predict",
                str(fasta),
                "--model",
                str(out / "model"),
                "--out",
                str(preds),
                "--stride",
                "400",
            ]
        )
        == 0
    )
    _, *rows = read_tsv(preds)
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in rows] == [
        ("1", "joined", "4", "0", "8000"),
        ("1", "joined", "4", "400", "8400"),
        ("1", "joined", "4", "800", "8800"),
        ("1", "joined", "4", "1000", "9000"),
        ("2", "short", "0", "", ""),
    ]
    assert rows[-1][-1] == "shorter than the model's minimum of 1000 bp" and rows[-1][6] == ""
    assert all(len(r) == 6 + 919 + 1 for r in rows)


def eval_chromatin(model, data, out, *options: str) -> int:
    """``genolong chromatin eval --model MODEL --data DATA --out OUT [options]``; the exit status."""
    return main(["chromatin", "eval", "--model", str(model), "--data", str(data), "--out", str(out), *options])


def test_eval_cli_on_the_central_1000bp(finetuned, prepared_1000, tmp_path, capsys, caplog):
    out, _ = finetuned
    aucs = tmp_path / "aucs.csv"
    assert eval_chromatin(out / "model", prepared_1000, aucs) == 0
    printed = capsys.readouterr()
    assert "200 rows of" in printed.out and "-> " + str(aucs) in printed.out
    assert "DeepSEA (published)    95.8    92.3    85.6" in printed.out
    assert "BigBird (published)    96.1    92.1    88.7" in printed.out
    assert "trained on 8000-bp windows" in caplog.text  # a warning, not an error
    assert aucs.read_text().splitlines()[0] == ",".join(AUC_COLUMNS)
    table = read_auc_table(aucs)
    test = PreparedChromatin(prepared_1000)["test"]
    scores = Classifier.load(out / "model", device="cpu").probabilities(
        [test.sequence(r) for r in range(200)]
    )
    for column in np.flatnonzero(~np.isnan(table.roc_auc))[:20]:
        assert table.roc_auc[column] == pytest.approx(
            roc_auc_score(test.labels[:, column], scores[:, column]), abs=1e-6
        )
        assert table.pr_auc[column] == pytest.approx(
            average_precision_score(test.labels[:, column], scores[:, column]), abs=1e-6
        )


def test_eval_cli_with_strand_averaging_on_8kb_rows(finetuned, prepared_8000, tmp_path):
    out, _ = finetuned
    aucs = tmp_path / "aucs.csv"
    assert eval_chromatin(out / "model", prepared_8000, aucs, "--rc", "--rows", "150") == 0
    table = read_auc_table(aucs)
    test = PreparedChromatin(prepared_8000)["test"]
    rows = evaluation_rows(len(test), 150)
    assert len(rows) == 150
    both = StrandAveraged(Classifier.load(out / "model", device="cpu"))
    scores = both.probabilities([test.sequence(int(r)) for r in rows])
    labels = np.asarray(test.labels[rows])
    assert (table.positives == labels.sum(0)).all()
    for column in np.flatnonzero(~np.isnan(table.roc_auc))[:20]:
        assert table.roc_auc[column] == pytest.approx(
            roc_auc_score(labels[:, column], scores[:, column]), abs=1e-6
        )



def test_eval_reads_a_both_strand_model_on_both_strands_unless_no_rc(finetuned, prepared_1000, tmp_path, capsys):
    """chromatin eval follows the model's own reading, as predict, scan and score-variants do."""
    out, _ = finetuned
    both_model = tmp_path / "both"
    shutil.copytree(out / "model", both_model)
    info = TaskInfo.read(both_model)
    info.inference = replace(get_task("chromatin").inference_spec(info.window_bp, "multilabel"), both_strands=True)
    info.write(both_model)
    runs = {"one --rc": (out / "model", "--rc"), "one": (out / "model",), "both": (both_model,),
            "both --no-rc": (both_model, "--no-rc")}
    tables, printed = {}, {}
    for name, (model, *options) in runs.items():
        tables[name] = tmp_path / f"{name}.csv"
        capsys.readouterr()
        assert eval_chromatin(model, prepared_1000, tables[name], "--rows", "40", *options) == 0
        printed[name] = capsys.readouterr().out
    assert tables["both"].read_bytes() == tables["one --rc"].read_bytes()
    assert tables["both --no-rc"].read_bytes() == tables["one"].read_bytes()
    assert tables["both"].read_bytes() != tables["one"].read_bytes()
    assert "both (both strands)" in printed["both"] and "(both strands)" not in printed["both --no-rc"]

def test_eval_and_predict_errors(finetuned, prepared_1000, tmp_path, capsys):
    out, _ = finetuned
    tokenizer = tiny_tokenizer(tmp_path / "tok")
    promoter = random_classifier(
        tmp_path / "promoter",
        tokenizer,
        task="promoter",
        window_bp=300,
        min_bp=300,
        label_names=["promoter"],
        threshold=0.5,
    )
    bad_fasta = tmp_path / "bad.fa"
    bad_fasta.write_text(">a\n" + "ACGT" * 300 + "\n>b\nAC-GT\n")
    cases = [
        (
            ["chromatin", "eval", "--model", str(promoter), "--data", str(prepared_1000)],
            "is a promoter model, not a chromatin model",
        ),
        (
            ["chromatin", "eval", "--model", str(out / "model"), "--data", str(tmp_path)],
            "not a prepared chromatin dataset",
        ),
        (
            [
                "chromatin",
                "eval",
                "--model",
                str(out / "model"),
                "--data",
                str(prepared_1000),
                "--split",
                "dev",
            ],
            "has no 'dev' split",
        ),
        (
            ["chromatin", "eval", "--model", str(out / "model"), "--data", str(prepared_1000), "--rows", "0"],
            "--rows: must be a positive integer",
        ),
        (["chromatin", "predict", str(bad_fasta), "--model", str(out / "model")], "invalid character '-'"),
        (["chromatin", "predict", str(bad_fasta), "--model", str(promoter)], "is a promoter model"),
    ]
    for args, message in cases:
        code = main([*args, "--out", str(tmp_path / "out.tsv")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (args, err)
        assert not (tmp_path / "out.tsv").exists()


def test_auc_table_reader_errors(tmp_path):
    path = tmp_path / "aucs.csv"
    path.write_text("index,name\n0,x\n")
    with pytest.raises(InputError, match="header is"):
        read_auc_table(path)
    path.write_text(",".join(AUC_COLUMNS) + "\n0,a,b,c,d,TF,1,2,0.5,0.4\n")
    with pytest.raises(InputError, match="expected 919 profile rows"):
        read_auc_table(path)
    with pytest.raises(InputError, match="no such AUC table"):
        read_auc_table(tmp_path / "none.csv")


def test_finetune_summary_prints_medians_next_to_the_published_rows(finetuned):
    from genolong.tasks.task import report_summary

    _, report = finetuned
    text = report_summary(report)
    assert f"test: 200 rows, {report['test']['profiles_with_auc']} profiles with an AUC" in text
    assert f"genolong {report['backbone']}" in text and "DeepSEA (published)    95.8    92.3    85.6" in text
