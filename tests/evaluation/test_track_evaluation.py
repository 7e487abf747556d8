"""Track metrics by hand and streamed, and the flat and k-mer ridge baselines on synthetic tracks."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.tracks import write_synthetic_tracks

from genolong.core.errors import ConfigError
from genolong.datasets.tracks import TrackDataset
from genolong.evaluation.track_kmers import KmerFeatures
from genolong.evaluation.tracks import (
    TrackMetricAccumulator,
    annotation_metrics,
    flat_baseline,
    kmer_ridge_baseline,
    plot_tracks,
    track_metrics,
)


def test_metrics_match_numpy_and_stream_exactly_enough():
    rng = np.random.default_rng(0)
    measured = rng.gamma(0.5, 2.0, (6, 50, 3))
    predicted = measured * rng.uniform(0.5, 1.5, measured.shape) + rng.uniform(0, 1, measured.shape)
    result = track_metrics(measured, predicted, ["CAGE", "CAGE", "DNase"], ["a", "b", "c"])
    for t, row in enumerate(result["per_track"]):
        x, y = measured[..., t].ravel(), predicted[..., t].ravel()
        assert row["pearson_raw"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)
        assert row["pearson_log1p"] == pytest.approx(np.corrcoef(np.log1p(x), np.log1p(y))[0, 1], abs=1e-9)
        residual, total = ((np.log1p(x) - np.log1p(y)) ** 2).sum(), ((np.log1p(x) - np.log1p(x).mean()) ** 2).sum()
        assert row["r2_log1p"] == pytest.approx(1 - residual / total, abs=1e-9)
    pearsons = [row["pearson_log1p"] for row in result["per_track"]]
    assert result["groups"]["CAGE"]["median_pearson_log1p"] == pytest.approx(np.median(pearsons[:2]))
    assert result["groups"]["DNase"]["tracks"] == 1 and result["bins"] == 300
    assert result["mean"]["pearson_log1p"] == pytest.approx(np.mean(pearsons)) and result["mean"]["tracks"] == 3
    streamed = TrackMetricAccumulator(3)
    for window in range(6):
        streamed.add(measured[window], predicted[window])
    again = streamed.result(["CAGE", "CAGE", "DNase"], ["a", "b", "c"])
    for row, other in zip(result["per_track"], again["per_track"], strict=True):
        assert all(row[s] == pytest.approx(other[s], abs=1e-9) for s in ("pearson_log1p", "pearson_raw", "r2_log1p"))


def test_a_constant_track_has_no_pearson_and_is_left_out_of_the_means():
    measured = np.array([[[0.0, 1.0], [0.0, 2.0], [0.0, 4.0]]])
    result = track_metrics(measured, measured + 1, ["A", "B"])
    assert result["per_track"][0]["pearson_log1p"] is None and result["per_track"][0]["r2_log1p"] is None
    assert result["per_track"][1]["pearson_raw"] == pytest.approx(1.0)
    assert result["mean"]["tracks"] == 1 and result["mean"]["pearson_raw"] == pytest.approx(1.0)
    assert result["groups"]["A"]["median_pearson_log1p"] is None


def test_kmer_features_by_hand():
    codes = np.array([0, 0, 1, 4, 2, 3, 3, 3], dtype=np.uint8)  # AAC N GTTT; 2 bins of 2 bp from offset 2
    features = KmerFeatures(k=2, bin_bp=2, target_offset_bp=2, target_bins=2, flank_bp=2)(codes)
    own, around = features[:, :16], features[:, 16:]
    assert own[0].sum() == 0  # bin [2, 4): CN and NG hold an N
    gt, tt, aa, ac = 2 * 4 + 3, 3 * 4 + 3, 0, 1
    assert own[1].tolist() == (0.5 * np.eye(16)[gt] + 0.5 * np.eye(16)[tt]).tolist()  # bin [4, 6): GT, TT
    assert around[0].tolist() == (0.25 * np.eye(16)[[aa, ac, gt, tt]].sum(axis=0)).tolist()  # [0, 6)
    with pytest.raises(ConfigError, match="flank_bp"):
        KmerFeatures(k=3, bin_bp=32, target_offset_bp=0, target_bins=4, flank_bp=100)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return write_synthetic_tracks(tmp_path_factory.mktemp("eval") / "set", windows=(12, 4, 4), input_bp=1024,
                                  bin_bp=32, tracks=3, seed=3)


def test_kmer_ridge_learns_the_local_signal_and_flat_scores_nothing(synthetic):
    with TrackDataset(synthetic) as data:
        result = kmer_ridge_baseline(data, k=3, flank_bp=64)
        flat = flat_baseline(data)
    gc = {name: result[name]["per_track"][2]["pearson_log1p"] for name in ("bin_only", "with_flanks")}
    assert gc["bin_only"] > 0.9 and gc["with_flanks"] > 0.9  # the GC fraction is linear in 3-mer frequencies
    assert result["options"]["alpha_chosen_on"] == "valid" and result["bin_only"]["alpha"] in result["options"]["alphas"]
    assert flat["mean"]["tracks"] == 0 and flat["per_track"][0]["pearson_log1p"] is None
    assert flat["per_track"][2]["r2_log1p"] < 0.05


def test_plot_tracks_writes_a_png(tmp_path):
    measured = np.abs(np.random.default_rng(0).normal(size=(16, 3)))
    fig = plot_tracks(measured, {"model": measured * 0.9, "k-mer": measured * 0.5}, tracks=[0, 2],
                      names=["a", "b", "c"], region=("chr1", 1000, 2024), bin_bp=32, target_offset_bp=256,
                      png=tmp_path / "tracks.png")
    assert (tmp_path / "tracks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and len(fig.axes) == 2


def test_annotation_metrics_by_hand():
    labels = np.array([[1, 0], [1, 0], [0, 0], [0, 0]])
    probabilities = np.array([[0.9, 0.1], [0.4, 0.2], [0.3, 0.7], [0.1, 0.1]])
    result = annotation_metrics(labels, probabilities, ["exon", "intron"])
    exon = result["per_class"]["exon"]
    assert exon["auprc"] == pytest.approx(1.0) and exon["positives"] == 2
    assert exon["mcc"] == pytest.approx(1 / np.sqrt(3))  # calls 1,0,0,0 against 1,1,0,0: TP 1 FN 1 TN 2
    assert result["per_class"]["intron"]["auprc"] is None and result["mean"]["auprc"] == pytest.approx(1.0)
