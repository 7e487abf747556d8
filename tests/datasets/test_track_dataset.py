import json
import pickle

import numpy as np
import pytest
from helpers.tracks import LONG_MOTIF, MOTIF, write_synthetic_tracks

from genolong.core.errors import InputError
from genolong.datasets.tracks import TrackDataset, reverse_complement_window, shift_window


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return write_synthetic_tracks(tmp_path_factory.mktemp("tracks") / "set", windows=(3, 2, 1), input_bp=512,
                                  bin_bp=16, tracks=3, seed=1, long_range_bp=96)


def test_reader_geometry_tracks_and_windows(synthetic):
    with TrackDataset(synthetic) as dataset:
        assert (dataset.input_bp, dataset.bin_bp, dataset.target_offset_bp, dataset.target_bins) == (512, 16, 128, 16)
        assert dataset.splits == ["train", "valid", "test"]
        assert dataset.strand_pair.tolist() == [1, 0, 2, 3]
        assert dataset.groups == ["CAGE", "CAGE", "DNase", "DISTAL"]
        train = dataset.split("train")
        assert len(train) == 3
        codes, targets = train.codes(2), train.targets(2)
        assert codes.shape == (512,) and codes.dtype == np.uint8 and codes.max() <= 3
        assert targets.shape == (16, 4) and targets.dtype == np.float32
        assert train.sequence(2) == "".join("ACGTN"[c] for c in codes)
        assert train.region(-1) == ("synthetic_train_2", 0, 512)
        with pytest.raises(IndexError):
            train.codes(3)


def test_synthetic_targets_count_what_the_sequence_holds(synthetic):
    with TrackDataset(synthetic) as dataset:
        split = dataset.split("valid")
        for i in range(len(split)):
            sequence, targets = split.sequence(i), split.targets(i)
            for b in range(16):
                start = 128 + 16 * b
                plus = sum(sequence.startswith(MOTIF, s) for s in range(start, start + 16))
                gc = sum(base in "GC" for base in sequence[start:start + 16]) / 16
                assert targets[b, 0] == plus and targets[b, 2] == gc
                assert targets[b, 3] == float(sequence.startswith(LONG_MOTIF, start - 96))
            assert targets[:, 3].sum() >= 1  # the distal motif is planted


def test_split_pickles_and_reopens_lazily(synthetic):
    dataset = TrackDataset(synthetic)
    split = dataset.split("test")
    before = split.codes(0)
    copy = pickle.loads(pickle.dumps(split))
    assert np.array_equal(copy.codes(0), before)
    dataset.close()
    copy.close()


def test_reverse_complement_window_by_hand():
    codes = np.array([0, 1, 2, 3, 4, 0], dtype=np.uint8)  # ACGTNA -> TNACGT
    targets = np.array([[1, 10, 100], [2, 20, 200]], dtype=np.float32)  # 2 bins x (+, -, unstranded)
    out_codes, out_targets = reverse_complement_window(codes, targets, np.array([1, 0, 2]))
    assert out_codes.tolist() == [3, 4, 0, 1, 2, 3]
    assert out_targets.tolist() == [[20, 2, 200], [10, 1, 100]]
    twice = reverse_complement_window(out_codes, out_targets, np.array([1, 0, 2]))
    assert np.array_equal(twice[0], codes) and np.array_equal(twice[1], targets)


def test_reverse_complement_swaps_the_synthetic_strand_pair_exactly(synthetic):
    with TrackDataset(synthetic) as dataset:
        split = dataset.split("train")
        codes, targets = reverse_complement_window(split.codes(0), split.targets(0)[:, :3], dataset.strand_pair[:3])
        sequence = "".join("ACGTN"[c] for c in codes)
        for b in range(16):
            start = 128 + 16 * b
            assert targets[b, 0] == sum(sequence.startswith(MOTIF, s) for s in range(start, start + 16))


def test_shift_window_fills_with_n():
    codes = np.array([0, 1, 2, 3], dtype=np.uint8)
    assert shift_window(codes, 1).tolist() == [4, 0, 1, 2]
    assert shift_window(codes, -2).tolist() == [2, 3, 4, 4]
    assert shift_window(codes, 0).tolist() == [0, 1, 2, 3]
    assert shift_window(codes, 9).tolist() == [4, 4, 4, 4]
    assert shift_window(np.stack([codes, codes]), 1).shape == (2, 4)


def test_invalid_directories_are_one_line_errors(tmp_path, synthetic):
    with pytest.raises(InputError, match="no manifest.json"):
        TrackDataset(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "genolong.task/1"}))
    with pytest.raises(InputError, match="not a genolong.tracks/1 manifest"):
        TrackDataset(tmp_path)
    with TrackDataset(synthetic) as dataset, pytest.raises(InputError, match="no holdout windows"):
        dataset.split("holdout")
