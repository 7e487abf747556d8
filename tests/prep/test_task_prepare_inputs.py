"""``genolong task prepare`` on the tables and files people have: damaged or foreign-encoded
tables, sequences longer than csv's default field limit, copies and contradictory labels, integer
class codes and Parquet list columns."""

from __future__ import annotations

import gzip

import pytest
from helpers.cli import one_line
from helpers.task_prepare import prepare, random_sequences, write_csv, write_fasta

from genolong.dna.sequence import reverse_complement


def test_a_csv_header_without_rows_is_one_line(tmp_path, capsys):
    table = tmp_path / "rows.csv"
    table.write_text("sequence,label\n")
    code, _ = prepare(tmp_path, "--table", table)
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "rows.csv:1:", "a header and no rows", "add the rows below the header")


def test_a_truncated_gzip_table_is_one_line_naming_where_it_ends(tmp_path, capsys):
    rows = "".join(f"{s},{i % 2}\n" for i, s in enumerate(random_sequences(400, 60, seed=1)))
    data = gzip.compress(("sequence,label\n" + rows).encode())
    table = tmp_path / "rows.csv.gz"
    table.write_bytes(data[:len(data) // 2])
    code, _ = prepare(tmp_path, "--table", table)
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "rows.csv.gz:", "the compressed data ends early, in line", "copy or download it again")


def test_a_latin1_table_is_one_line_naming_the_line_and_the_fix(tmp_path, capsys):
    table = tmp_path / "rows.csv"
    lines = [f"{s},{'caf' + chr(0xE9) if i == 2 else 'tea'}" for i, s in enumerate(random_sequences(6, 20, seed=2))]
    table.write_bytes(("sequence,label\n" + "\n".join(lines) + "\n").encode("latin-1"))
    code, _ = prepare(tmp_path, "--table", table)
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "rows.csv:4:", "byte 0xe9 is not UTF-8 text", "save the table as UTF-8")


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_a_250_kb_sequence_enters_through_a_table_and_comes_out_whole(tmp_path, suffix):
    long = random_sequences(1, 250_000, seed=3)[0]
    sequences = [long, *random_sequences(11, 50, seed=4)]
    labels = [i % 2 for i in range(len(sequences))]
    table = tmp_path / f"rows{suffix}"
    if suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"sequence": sequences, "label": labels}), table)
    else:
        write_csv(table, ["sequence", "label"], list(zip(sequences, labels, strict=True)),
                  sep="\t" if suffix == ".tsv" else ",")
    code, task = prepare(tmp_path, "--table", table, "--seed", 1)
    assert code == 0 and task.manifest["max_sequence_length"] == 250_000
    written = [s for name in task.splits for s in task[name].sequences]
    assert long in written and sorted(written) == sorted(sequences)


def test_one_fasta_file_given_as_two_classes_is_one_line(tmp_path, capsys):
    fasta = write_fasta(tmp_path / "seqs.fa", random_sequences(10, 30, seed=5))
    code, _ = prepare(tmp_path, "--class", f"a={fasta}", "--class", f"b={fasta}")
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "seqs.fa", "given as class 'a' and as class 'b'", "give each class its own FASTA file")


def test_sequences_in_both_classes_are_counted_and_dropped_by_default(tmp_path, capsys):
    shared = random_sequences(10, 40, seed=6)
    first = write_fasta(tmp_path / "a.fa", random_sequences(30, 40, seed=7) + shared)
    second = write_fasta(tmp_path / "b.fa", shared[:5] + [reverse_complement(s) for s in shared[5:]]
                         + random_sequences(30, 40, seed=8))
    code, task = prepare(tmp_path, "--class", f"a={first}", "--class", f"b={second}")
    assert code == 0
    assert task.manifest["duplicates"]["splits"] == {"all": {"repeated": 0, "conflicting": 20,
                                                             "reverse_complement": 5}}
    assert sum(task.manifest["rows"].values()) == 60
    kept = {s for name in task.splits for s in task[name].sequences}
    assert not kept & set(shared)
    printed = capsys.readouterr().out
    assert "duplicates: 20 rows copy another row of their split (all: 0 repeated, 20 with conflicting labels (5 " \
           "as reverse complement)): dropped (--duplicates drop)" in printed
    (tmp_path / "kept").mkdir()
    code, task = prepare(tmp_path / "kept", "--class", f"a={first}", "--class", f"b={second}", "--duplicates", "keep")
    leaked = sum(sum(c.values()) for c in task.manifest["leakage"]["removed"].values())
    assert code == 0 and sum(task.manifest["rows"].values()) + leaked == 80  # copies drawn into two splits: leakage
    assert task.manifest["duplicates"]["splits"]["all"]["conflicting"] == 20


def test_duplicates_error_names_the_copy_and_the_row_it_copies(tmp_path, capsys):
    shared = random_sequences(1, 40, seed=6)
    first = write_fasta(tmp_path / "a.fa", random_sequences(10, 40, seed=7) + shared)
    second = write_fasta(tmp_path / "b.fa", random_sequences(10, 40, seed=8) + shared)
    code, _ = prepare(tmp_path, "--class", f"a={first}", "--class", f"b={second}", "--duplicates", "error")
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "b.fa:11:", "its sequence is that of", "a.fa:11 ('s10'), with other labels", "--duplicates drop")


def test_rows_listed_twice_are_counted_per_given_split(tmp_path, capsys):
    seqs = random_sequences(40, 30, seed=9)
    train_rows = [(s, i % 2) for i, s in enumerate(seqs[:24])]
    train_rows += [(s, 1 - y) for s, y in train_rows[:5]] + [train_rows[5], train_rows[6]]  # 5 flipped, 2 repeated
    test_rows = [(s, i % 2) for i, s in enumerate(seqs[24:])] + [(seqs[24], 0)]
    train = write_csv(tmp_path / "train.csv", ["sequence", "label"], train_rows)
    test = write_csv(tmp_path / "test.csv", ["sequence", "label"], test_rows)
    valid = write_csv(tmp_path / "valid.csv", ["sequence", "label"], [(s, i % 2) for i, s in enumerate(
        random_sequences(6, 30, seed=10))])
    code, task = prepare(tmp_path, "--table", f"train={train}", "--table", f"valid={valid}", "--table", f"test={test}")
    assert code == 0
    assert task.manifest["duplicates"]["splits"] == {
        "train": {"repeated": 2, "conflicting": 10, "reverse_complement": 0},
        "valid": {"repeated": 0, "conflicting": 0, "reverse_complement": 0},
        "test": {"repeated": 1, "conflicting": 0, "reverse_complement": 0}}
    assert task.manifest["rows"] == {"train": 24 - 5, "valid": 6, "test": 16}
    assert "(train: 2 repeated, 10 with conflicting labels; valid: 0 repeated" in capsys.readouterr().out


@pytest.mark.parametrize(("codes", "argv", "classes", "positive"), [
    (("1", "2"), [], ["1", "2"], "2"),
    (("-1", "+1"), [], ["-1", "1"], "1"),
    (("-1", "+1"), ["--positive", "-1"], ["1", "-1"], "-1"),
    (("0", "1"), [], ["0", "1"], "1"),
])
def test_two_integer_codes_are_a_binary_task_with_a_stated_positive(tmp_path, capsys, codes, argv, classes, positive):
    rows = [(s, codes[i % 2]) for i, s in enumerate(random_sequences(20, 20, seed=11))]
    code, task = prepare(tmp_path, "--table", write_csv(tmp_path / "rows.csv", ["sequence", "label"], rows), *argv)
    assert code == 0 and task.problem_type == "binary"
    assert task.manifest["classes"] == classes and task.manifest["positive"] == positive
    printed = capsys.readouterr().out
    assert "binary task (inferred from the labels)" in printed
    assert f"classes: {', '.join(classes)}; positive: {positive} (--positive picks it)" in printed


def test_two_integer_codes_are_a_regression_when_stated(tmp_path, capsys):
    rows = [(s, ("1", "2")[i % 2]) for i, s in enumerate(random_sequences(20, 20, seed=11))]
    code, task = prepare(tmp_path, "--table", write_csv(tmp_path / "rows.csv", ["sequence", "label"], rows),
                         "--problem-type", "regression")
    assert code == 0 and task.problem_type == "regression" and task.manifest["classes"] is None
    assert "regression task (as --problem-type says)" in capsys.readouterr().out


def test_a_parquet_list_column_is_read_as_multilabel_and_says_so(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    labels = [[i % 2, (i // 2) % 2, 1 - i % 2] for i in range(20)]
    pq.write_table(pa.table({"sequence": random_sequences(20, 20, seed=12), "labels": labels}), tmp_path / "rows.parquet")
    code, task = prepare(tmp_path, "--table", tmp_path / "rows.parquet")
    assert code == 0 and task.problem_type == "multilabel" and task.outputs == ["labels_0", "labels_1", "labels_2"]
    assert task.manifest["label_lists"] == {"labels": 3}
    assert "label column 'labels' holds lists of 3: read as 3 label columns labels_0..labels_2, a multilabel task" \
        in capsys.readouterr().out


def test_a_parquet_list_column_of_uneven_lists_is_one_line(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    labels = [[0, 1]] * 5 + [[0, 1, 1]] + [[1, 0]] * 4
    pq.write_table(pa.table({"sequence": random_sequences(10, 20, seed=13), "labels": labels}), tmp_path / "rows.parquet")
    code, _ = prepare(tmp_path, "--table", tmp_path / "rows.parquet")
    assert code == 2 and not (tmp_path / "task").exists()
    one_line(capsys, "rows.parquet:6:", "column 'labels' holds a list of 3 here and a list of 2 in row 1")
