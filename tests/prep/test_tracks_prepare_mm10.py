"""The real mouse tracks of ../shared/data/tracks/mm10_tiny prepared from their bigWigs, windows FASTA and
regions BED: the targets must be the producer's float16 arrays bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.tracks import prepare_mm10_tiny

from genolong.datasets.tracks import TrackDataset


@pytest.mark.slow
def test_mm10_tiny_prepares_to_the_producers_targets(shared_data, tmp_path):
    expected = np.load(shared_data / "tracks" / "mm10_tiny" / "arrays.npz")
    by_contig = {str(c): (t, str(s)) for c, t, s in zip(expected["contigs"], expected["targets"], expected["splits"],
                                                        strict=True)}
    with TrackDataset(prepare_mm10_tiny(shared_data, tmp_path)) as data:
        assert data.manifest["splits"] == {"train": 28, "valid": 13, "test": 13}
        assert (data.input_bp, data.bin_bp, data.target_offset_bp, data.target_bins) == (131072, 32, 32768, 2048)
        assert data.groups.count("CAGE") == 14 and data.strand_pair[:2].tolist() == [1, 0]
        for name in data.splits:
            split = data.split(name)
            for i in range(len(split)):
                contig, start, end = split.region(i)
                targets, producer_split = by_contig[contig]
                stored = split._group()["targets"][i]
                assert (start, end, producer_split) == (0, 131072, name)
                assert stored.dtype == np.float16 and np.array_equal(stored.view(np.uint16), targets.view(np.uint16))
