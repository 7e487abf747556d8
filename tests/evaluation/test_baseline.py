"""Promoter metrics (hand-computed cases) and the k-mer + logistic regression baseline on real data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from genolong.cli.main import main
from genolong.core.errors import ConfigError, UserError
from genolong.dna.sequence import write_fasta
from genolong.evaluation.kmer_baseline import KmerBaselineConfig, KmerCounts, run_kmer_baseline
from genolong.evaluation.metrics import (
    PROMOTER_METRICS,
    best_f1_threshold,
    format_metrics_table,
    promoter_metrics,
)
from genolong.prep.promoter_dataset import PromoterDatasetConfig, build_promoter_dataset
from genolong.prep.promoters import read_fasta_records


# -- metrics --------------------------------------------------------------------------------
def test_promoter_metrics_by_hand():
    y, p = [0, 0, 1, 1], [0.1, 0.6, 0.4, 0.9]
    m = promoter_metrics(y, p, 0.5)  # predictions 0 1 0 1: one TP, one FP, one FN, one TN
    assert m["precision"] == m["recall"] == m["f1"] == 0.5
    assert m["mcc"] == 0.0
    assert m["auroc"] == 0.75  # 3 of the 4 positive/negative pairs are ordered right
    assert m["auprc"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert (m["n"], m["n_positive"], m["threshold"]) == (4, 2, 0.5)


def test_best_f1_threshold_by_hand():
    # Thresholds 0.9: F1 2/3; 0.6: 1/2; 0.4: P 2/3, R 1 -> F1 0.8 (best); 0.1: 2/3.
    assert best_f1_threshold([0, 0, 1, 1], [0.1, 0.6, 0.4, 0.9]) == 0.4
    assert best_f1_threshold([0, 1, 1], [0.2, 0.7, 0.7]) == 0.7
    with pytest.raises(UserError, match="needs both labels"):
        best_f1_threshold([1, 1], [0.2, 0.3])


def test_format_metrics_table():
    m = promoter_metrics([0, 1], [0.2, 0.8], 0.5)
    table = format_metrics_table({"kmer test": m, "model test": m})
    lines = table.splitlines()
    assert len(lines) == 3 and all(name in lines[0] for name in PROMOTER_METRICS)
    assert lines[1].startswith("kmer test ") and "1.0000" in lines[1]


# -- the baseline -----------------------------------------------------------------------------
def test_baseline_config_validation():
    with pytest.raises(ConfigError, match="k_min <= k_max"):
        KmerBaselineConfig(k_min=6, k_max=4)
    with pytest.raises(ConfigError, match="positive"):
        KmerBaselineConfig(Cs=(0.0,))


def test_kmer_counts_count_acgt_kmers_only_in_the_columns_of_their_vocabulary():
    counts = KmerCounts(1, 2).fit(["ACGT", "AANAC"])
    assert counts.vocabulary_ == {kmer: i for i, kmer in enumerate(["A", "AA", "AC", "C", "CG", "G", "GT", "T"])}
    matrix = counts.transform(["AANAC", "ggACTT"]).toarray()  # N and lowercase break k-mers; TT, CT unseen
    np.testing.assert_array_equal(matrix, [[3, 1, 1, 1, 0, 0, 0, 0], [1, 0, 1, 1, 0, 0, 0, 2]])
    fixed = KmerCounts(2, 2, {"TT": 0, "AC": 1}).fit([])
    np.testing.assert_array_equal(fixed.transform(["ACTTT", "NNN", ""]).toarray(), [[2, 1], [0, 0], [0, 0]])


def test_kmer_counts_of_acgt_sequences_are_scikit_learns_character_ngram_counts_to_the_bit(real_data):
    """The counts the k-mer models were fitted on before, stored in the same order (row sums follow it)."""
    from sklearn.feature_extraction.text import CountVectorizer

    sequences = [r.sequence for r in read_fasta_records(real_data / "promoters" / "Mouse_tata.fa", 1)[:60]]
    for vocabulary in (None, {"TATA": 0, "ACGT": 1, "GGGCG": 2}):
        ours, theirs = KmerCounts(4, 6, vocabulary), CountVectorizer(
            analyzer="char", ngram_range=(4, 6), lowercase=False, vocabulary=vocabulary, dtype=np.float64)
        for fitted in ((ours.fit_transform(sequences), theirs.fit_transform(sequences)),
                       (ours.transform(sequences[:9]), theirs.transform(sequences[:9]))):
            for part in ("indptr", "indices", "data"):
                np.testing.assert_array_equal(getattr(fitted[0], part), getattr(fitted[1], part))
        assert ours.vocabulary_ == theirs.vocabulary_


@pytest.fixture(scope="module")
def real_subsets(real_data, tmp_path_factory):
    """Small real datasets: 300 DeePromoter promoters + substitution, and 300 + 300 real promoters/non-promoters."""
    root = tmp_path_factory.mktemp("baseline")
    promoters = real_data / "promoters"
    lines = (promoters / "mm_pos_TATA.txt").read_text().splitlines()[:300]
    (root / "pos.txt").write_text("\n".join(lines) + "\n")
    build_promoter_dataset(PromoterDatasetConfig(text=root / "pos.txt"), root / "substitution")
    for name, source in (("tata.fa", "Mouse_tata.fa"), ("nonprom.fa", "Mouse_nonprom.fa")):
        records = read_fasta_records(promoters / source, 1)[:300]
        write_fasta(root / name, [(r.id.replace(":", "_"), r.sequence) for r in records])
    build_promoter_dataset(
        PromoterDatasetConfig(fasta=root / "tata.fa", negatives="fasta", negative_fasta=root / "nonprom.fa"),
        root / "real",
    )
    return root


@pytest.mark.parametrize(("dataset", "min_f1"), [("substitution", 0.8), ("real", 0.6)])
def test_baseline_beats_chance_on_real_data(real_subsets, dataset, min_f1):
    report = run_kmer_baseline(real_subsets / dataset, KmerBaselineConfig(Cs=(1e-3, 1e-2)))
    test = report["test"]
    # Chance: AUROC 0.5 and, with balanced classes, F1 about 0.5 at best (all-positive gives 2/3).
    assert test["auroc"] > 0.75 and test["f1"] > min_f1 and test["mcc"] > 0.3, test
    assert test["n"] == 2 * test["n_positive"] >= 60  # balanced test sets
    assert report["C"] in (1e-3, 1e-2) and report["features"] >= 4**6
    assert report["valid"]["threshold"] == test["threshold"]  # chosen on valid, reused on test


def test_cli_baseline_writes_report_and_table(real_subsets, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "promoter",
                "baseline",
                "--data",
                str(real_subsets / "substitution"),
                "--k-min",
                "3",
                "--k-max",
                "4",
                "--C",
                "0.01",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "kmer 3-4 (C=0.01) test" in printed and "auprc" in printed
    report = json.loads(out.read_text())
    assert report["config"]["k_min"] == 3 and set(PROMOTER_METRICS) <= set(report["test"])
    assert np.isfinite(report["test"]["f1"])


def test_cli_baseline_on_a_directory_that_is_not_a_dataset(tmp_path, capsys):
    assert main(["promoter", "baseline", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a promoter dataset" in err and err.count("\n") == 1
