"""The k-mer baselines of the real mouse tracks (../shared/data/tracks/mm10_tiny): near the published
description's 0.075 (bin only) and 0.134 (with +-16 kb flanks) mean Pearson r of log1p values on test."""

from __future__ import annotations

import pytest
from helpers.tracks import prepare_mm10_tiny

from genolong.datasets.tracks import TrackDataset
from genolong.evaluation.tracks import flat_baseline, kmer_ridge_baseline


@pytest.mark.slow
def test_mm10_tiny_kmer_baselines(shared_data, tmp_path):
    with TrackDataset(prepare_mm10_tiny(shared_data, tmp_path)) as data:
        result = kmer_ridge_baseline(data, k=3, flank_bp=16384)
        flat = flat_baseline(data)
    bin_only, with_flanks = result["bin_only"]["mean"], result["with_flanks"]["mean"]
    assert bin_only["tracks"] == with_flanks["tracks"] == 32
    assert 0.05 < bin_only["pearson_log1p"] < 0.12
    assert 0.11 < with_flanks["pearson_log1p"] < 0.18
    assert with_flanks["pearson_log1p"] > bin_only["pearson_log1p"] + 0.03
    assert set(result["with_flanks"]["groups"]) == {"CAGE", "DNASE", "RNA", "RNA3"}
    assert flat["mean"]["tracks"] == 0 and flat["mean"]["r2_log1p"] < 0
