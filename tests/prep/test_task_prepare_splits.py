"""``genolong task prepare``: given splits are kept (never pooled; valid drawn from train when
absent), FASTA classes per split, the same record ids from CSV and Parquet, ``--regions``."""

from __future__ import annotations

import pytest
from helpers.cli import one_line
from helpers.task_prepare import prepare, random_sequences, write_csv, write_fasta

from genolong.cli.main import main


def labelled_csv(path, count, seed):
    return write_csv(path, ["sequence", "label"], [(s, "ab"[i % 2]) for i, s in enumerate(random_sequences(count, 30, seed))])


@pytest.mark.parametrize("split", ["random", "chromosome"])
def test_given_splits_are_never_pooled_by_a_split_method(tmp_path, capsys, split):
    train, test = labelled_csv(tmp_path / "a.csv", 40, seed=1), labelled_csv(tmp_path / "heldout.csv", 20, seed=2)
    code, _ = prepare(tmp_path, "--table", f"train={train}", "--table", f"test={test}", "--split", split)
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "heldout.csv is given as the test split", f"--split {split} would pool the given splits",
             "leave out --split to keep them")


def test_train_and_test_without_valid_draw_valid_from_train_and_say_so(tmp_path, capsys):
    train, test = labelled_csv(tmp_path / "a.csv", 40, seed=1), labelled_csv(tmp_path / "heldout.csv", 20, seed=2)
    code, task = prepare(tmp_path, "--table", f"train={train}", "--table", f"test={test}", "--seed", 4)
    assert code == 0 and task.manifest["rows"] == {"train": 36, "valid": 4, "test": 20}
    assert task.manifest["split"] == {"method": "given", "valid_from_train": {"fraction": 0.1, "seed": 4}}
    assert task["test"].sequences == random_sequences(20, 30, seed=2)
    assert set(task["valid"].sequences) < set(random_sequences(40, 30, seed=1))
    assert sorted(task.manifest["class_counts"]["valid"].values()) == [2, 2]
    assert "valid: no valid split given; drew 0.1 of each class of train (seed 4), 4 rows" in capsys.readouterr().out


def test_too_few_train_rows_to_draw_valid_name_the_way_out(tmp_path, capsys):
    train, test = labelled_csv(tmp_path / "a.csv", 8, seed=1), labelled_csv(tmp_path / "heldout.csv", 4, seed=2)
    code, _ = prepare(tmp_path, "--table", f"train={train}", "--table", f"test={test}")
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "the valid split is empty (0.1 of each class of the train split rounds to no row)",
             "--table valid=PATH")


def test_fasta_classes_per_split_keep_their_split(tmp_path):
    files = {(split, name): write_fasta(tmp_path / f"{split}_{name}.fa", random_sequences(n, 30, seed), prefix=name)
             for split, n, seeds in (("train", 20, (1, 2)), ("test", 6, (3, 4)))
             for name, seed in zip(("tata", "other"), seeds, strict=True)}
    argv = [a for (split, name), path in files.items() for a in ("--class", f"{split}:{name}={path}")]
    code, task = prepare(tmp_path, *argv)
    assert code == 0 and task.outputs == ["tata"] and task.manifest["split"]["method"] == "given"
    assert task["test"].sequences == random_sequences(6, 30, seed=3) + random_sequences(6, 30, seed=4)
    assert task.manifest["rows"] == {"train": 36, "valid": 4, "test": 12}


def test_fasta_classes_with_and_without_a_split_are_refused(tmp_path, capsys):
    a, b = (write_fasta(tmp_path / f"{n}.fa", random_sequences(10, 30, seed)) for n, seed in (("a", 1), ("b", 2)))
    code, _ = prepare(tmp_path, "--class", f"train:a={a}", "--class", f"b={b}")
    assert code == 2
    one_line(capsys, "give every --class as NAME=FASTA, or every one as SPLIT:NAME=FASTA")
    code, _ = prepare(tmp_path, "--class", f"tarin:a={a}", "--class", f"tarin:b={b}")
    assert code == 2
    one_line(capsys, "--class tarin:a=...: the split must be one of", "got 'tarin'")


def test_a_csv_and_the_same_table_as_parquet_give_the_same_record_ids(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    sequences, labels = random_sequences(20, 30, seed=5), ["ab"[i % 2] for i in range(20)]
    csv_table = write_csv(tmp_path / "rows.csv", ["sequence", "label"], list(zip(sequences, labels, strict=True)))
    pq.write_table(pa.table({"sequence": sequences, "label": labels}), tmp_path / "rows.parquet")
    ids = []
    for source in (csv_table, tmp_path / "rows.parquet"):
        (tmp_path / source.suffix[1:]).mkdir()
        code, task = prepare(tmp_path / source.suffix[1:], "--table", source)
        assert code == 0
        ids.append({name: task[name].ids for name in task.splits})
    assert ids[0] == ids[1]
    by_id = dict(zip(ids[0]["train"], (task["train"].sequences), strict=True))
    assert by_id["row1"] == sequences[0]


def test_regions_is_the_option_and_bed_a_deprecated_alias(tmp_path, capsys, real_data):
    bed = tmp_path / "regions.bed"
    bed.write_text("".join(f"chr17\t{s}\t{s + 100}\n" for s in range(1000, 31000, 1500)))
    genome = real_data / "genomes" / "chr17.hg19.part.fa"
    outs = []
    for option in ("--regions", "--bed"):
        out = tmp_path / option.strip("-")
        assert main(["task", "prepare", option, str(bed), "--genome", str(genome), "--window", "100",
                     "--background", "1", "--out", str(out)]) == 0
        outs.append((out / "train.tsv").read_text())
    assert outs[0] == outs[1]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["genolong task prepare --bed: deprecated, use --regions"]
