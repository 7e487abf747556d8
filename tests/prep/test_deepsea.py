"""DeepSEA .mat readers (genolong/prep/deepsea.py): both MATLAB formats, one-hot decoding, strand pairs, errors."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import scipy.io
from helpers.deepsea import deepsea_rows, one_hot_agct, write_mat_v5, write_mat_v73

from genolong.core.errors import InputError
from genolong.prep.deepsea import FORMAT_V5, FORMAT_V73, DeepSEAMat, decode_one_hot, strand_pair_layout


@pytest.fixture(scope="module")
def rows(real_data):
    return deepsea_rows(real_data)


def read_all(mat: DeepSEAMat, rows_per_chunk: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    starts, sequences, labels = [], [], []
    for start, chunk_sequences, chunk_labels in mat.chunks(rows_per_chunk):
        starts.append(start)
        sequences.append(chunk_sequences)
        labels.append(chunk_labels)
    return np.concatenate(sequences), np.concatenate(labels), starts


def test_v73_reader_undoes_matlab_axis_reversal(rows, tmp_path):
    sequences, labels = rows
    path = tmp_path / "train.mat"
    write_mat_v73(path, "train", sequences, labels, hdf5_chunk_rows=16)
    with h5py.File(path) as handle:  # the fixture has the real file's layout
        assert handle["trainxdata"].shape == (1000, 4, 200) and handle["traindata"].shape == (919, 200)
    with DeepSEAMat(path, "train") as mat:
        assert (mat.format, mat.rows, mat.length) == (FORMAT_V73, 200, 1000)
        read_sequences, read_labels, starts = read_all(mat, rows_per_chunk=37)
    assert starts == list(range(0, 200, 48))  # 37 rows rounded up to whole HDF5 chunks of 16
    np.testing.assert_array_equal(read_sequences, sequences)
    np.testing.assert_array_equal(read_labels, labels)
    assert read_sequences.dtype == np.uint8 and read_labels.dtype == np.uint8


def test_v5_reader(rows, tmp_path):
    sequences, labels = rows
    path = tmp_path / "test.mat"
    write_mat_v5(path, "test", sequences, labels)
    assert scipy.io.whosmat(path)[0][1] in ((200, 4, 1000), (200, 919))
    with DeepSEAMat(path, "test") as mat:
        assert (mat.format, mat.rows, mat.length) == (FORMAT_V5, 200, 1000)
        read_sequences, read_labels, starts = read_all(mat, rows_per_chunk=64)
    assert starts == [0, 64, 128, 192]
    np.testing.assert_array_equal(read_sequences, sequences)
    np.testing.assert_array_equal(read_labels, labels)


def test_chunks_resume_from_a_row(rows, tmp_path):
    sequences, labels = rows
    write_mat_v5(tmp_path / "valid.mat", "valid", sequences, labels)
    with DeepSEAMat(tmp_path / "valid.mat", "valid") as mat:
        start, chunk, _ = next(mat.chunks(500, start=150))
    assert start == 150
    np.testing.assert_array_equal(chunk, sequences[150:])


def test_decode_one_hot_hand_case():
    # Channels are A, G, C, T (not alphabetical); an all-zero column is N.
    one_hot = np.array(
        [
            [
                [1, 0, 0, 0, 0],  # A
                [0, 1, 0, 0, 0],  # G
                [0, 0, 1, 0, 0],  # C
                [0, 0, 0, 1, 0],
            ]
        ],  # T
        dtype=np.uint8,
    )
    assert decode_one_hot(one_hot, "x").tobytes() == b"AGCTN"
    assert decode_one_hot(one_hot.astype(np.float64), "x").tobytes() == b"AGCTN"


def test_decode_rejects_two_hot_and_non_binary_values():
    one_hot = one_hot_agct(np.frombuffer(b"ACGTACGT", np.uint8)[None])
    two_hot = one_hot.copy()
    two_hot[0, 1, 5] = 1  # position 5 is C; set G too
    with pytest.raises(InputError, match=r"row 7, position 5: 2 bases set"):
        decode_one_hot(two_hot, "train.mat", first_row=7)
    fractional = one_hot.astype(np.float32)
    fractional[0, 0, 3] = 0.5
    with pytest.raises(InputError, match=r"row 0, position 3: one-hot value 0.5; expected 0 or 1"):
        decode_one_hot(fractional, "train.mat")


def test_strand_pair_layouts(rows):
    sequences, labels = rows
    assert strand_pair_layout(sequences, labels, chunk_rows=33) == {
        "layout": "halves",
        "pair_fraction": {"halves": 1.0, "interleaved": 0.0},
    }
    order = np.stack([np.arange(100), np.arange(100) + 100], axis=1).ravel()  # 0, 100, 1, 101, ...
    assert strand_pair_layout(sequences[order], labels[order])["layout"] == "interleaved"
    other_labels = labels.copy()
    other_labels[150, 0] ^= 1  # pairs must agree in labels too
    result = strand_pair_layout(sequences, other_labels)
    assert result["layout"] == "none" and result["pair_fraction"]["halves"] == 1.0
    assert strand_pair_layout(sequences[:199], labels[:199]) == {"layout": "none", "pair_fraction": {}}


# -- bad input ----------------------------------------------------------------------------------


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_missing_keys_named(rows, tmp_path):
    sequences, labels = rows
    write_mat_v73(tmp_path / "train.mat", "valid", sequences, labels)  # keys of another split
    with pytest.raises(InputError) as err:
        DeepSEAMat(tmp_path / "train.mat", "train")
    assert "expected variables 'trainxdata' and 'traindata'" in one_line(err)
    assert "['validdata', 'validxdata']" in str(err.value)
    scipy.io.savemat(tmp_path / "test.mat", {"x": np.zeros((2, 4, 10), np.uint8)})
    with pytest.raises(InputError, match="missing \\['testxdata', 'testdata'\\]"):
        DeepSEAMat(tmp_path / "test.mat", "test")


def test_wrong_label_columns(rows, tmp_path):
    sequences, labels = rows
    write_mat_v5(tmp_path / "valid.mat", "valid", sequences, labels[:, :918])
    with pytest.raises(InputError) as err:
        DeepSEAMat(tmp_path / "valid.mat", "valid")
    assert "918 label columns, DeepSEA has 919" in one_line(err)
    write_mat_v73(tmp_path / "train.mat", "train", sequences, labels[:, :918])
    with pytest.raises(InputError, match="918 label columns"):
        DeepSEAMat(tmp_path / "train.mat", "train")


def test_wrong_sequence_shapes(rows, tmp_path):
    sequences, labels = rows
    path = tmp_path / "train.mat"
    with h5py.File(path, "w") as handle:  # rows-first, as if written without MATLAB's axis reversal
        handle["trainxdata"] = one_hot_agct(sequences)
        handle["traindata"] = labels.T
    with pytest.raises(InputError) as err:
        DeepSEAMat(path, "train")
    assert "(200, 4, 1000) and 'traindata' (919, 200) disagree on the number of rows" in one_line(err)
    assert "expected (length, 4, rows) and (919, rows)" in str(err.value)
    scipy.io.savemat(tmp_path / "test.mat", {"testxdata": one_hot_agct(sequences)[:, :3], "testdata": labels})
    with pytest.raises(InputError, match=r"shape \(200, 3, 1000\); expected \(rows, 4, length\)"):
        DeepSEAMat(tmp_path / "test.mat", "test")
    write_mat_v5(tmp_path / "valid.mat", "valid", sequences, labels[:150])
    with pytest.raises(InputError, match=r"number of rows \(200 vs 150\); expected \(rows, 4, length\)"):
        DeepSEAMat(tmp_path / "valid.mat", "valid")


def test_invalid_values_name_the_row(rows, tmp_path):
    sequences, labels = rows
    bad_labels = labels.copy()
    bad_labels[123, 45] = 2
    write_mat_v5(tmp_path / "test.mat", "test", sequences, bad_labels)
    with (
        DeepSEAMat(tmp_path / "test.mat", "test") as mat,
        pytest.raises(InputError, match="row 123, profile 45: label 2; expected 0 or 1"),
    ):
        list(mat.chunks(50))
    one_hot = one_hot_agct(sequences)
    one_hot[160, :, 10] = 1  # all four channels set
    with h5py.File(tmp_path / "train.mat", "w") as handle:
        handle["trainxdata"] = one_hot.transpose(2, 1, 0)
        handle["traindata"] = labels.T
    with (
        DeepSEAMat(tmp_path / "train.mat", "train") as mat,
        pytest.raises(InputError, match="row 160, position 10: 4 bases set"),
    ):
        list(mat.chunks(64))


def test_not_a_mat_file(tmp_path):
    (tmp_path / "valid.mat").write_text("sequence,label\nACGT,1\n")
    with pytest.raises(InputError, match="not a MATLAB v5 or v7.3 file"):
        DeepSEAMat(tmp_path / "valid.mat", "valid")
    (tmp_path / "test.mat").write_bytes(b"MATLAB 5.0 MAT-file".ljust(200, b"\x07"))  # a cut-off download
    with pytest.raises(InputError, match="unreadable MATLAB v5 file"):
        DeepSEAMat(tmp_path / "test.mat", "test")
    with pytest.raises(InputError, match="no such file"):
        DeepSEAMat(tmp_path / "missing.mat", "valid")
