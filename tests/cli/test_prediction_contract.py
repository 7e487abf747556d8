"""One contract for the prediction commands: the ``--model`` forms of every command
(genolong/cli/arguments.py), the first columns of every table (genolong/inference/predict/writers.py),
long, short and N-rich records (genolong/classifier/records.py), and ``genolong task predict`` on top of them."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import pytest
from helpers.classify import random_classifier, tiny_tokenizer

from genolong.classifier.records import window_starts
from genolong.cli.arguments import classifier_directory, model_directory
from genolong.cli.main import build_parser, main
from genolong.dna.sequence import write_fasta

WINDOW, MIN_BP, NAMES = 100, 60, ["a", "b"]
#: The first columns of every prediction table.
FIRST_COLUMNS = ("record", "id", "length", "windows")


def random_dna(length: int, seed: int) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGT"), length))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A fine-tuning run directory: RUN/model, a random classifier of the labelled task (sigmoids)."""
    work = tmp_path_factory.mktemp("labelled")
    random_classifier(work / "run" / "model", tiny_tokenizer(work / "tokenizer"), task="labelled",
                      window_bp=WINDOW, min_bp=MIN_BP, label_names=NAMES)
    return work / "run"


def all_parsers(parser: argparse.ArgumentParser, name: str = "genolong"):
    """``(command, parser)`` of ``parser`` and every sub-command under it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, sub in action.choices.items():
                yield from all_parsers(sub, f"{name} {word}")


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def read_table(path: Path, delimiter: str = "\t") -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("#")), delimiter=delimiter))


def task_predict(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["task", "predict", *argv])
    return code, capsys.readouterr().err


# -- --model ----------------------------------------------------------------------------------
def test_every_model_option_takes_its_forms_from_one_place():
    parsers = dict(all_parsers(build_parser()))
    commands = {name: option(parser, "--model") for name, parser in parsers.items()}
    commands = {name: action for name, action in commands.items() if action is not None}
    assert {"genolong task predict", "genolong extrapolate", "genolong embed", "genolong scan"} <= set(commands)
    assert {name: action.type for name, action in commands.items()
            if action.type not in (model_directory, classifier_directory)} == {}


def test_task_predict_reads_a_run_directory(run, tmp_path, capsys):
    write_fasta(tmp_path / "in.fa", [("r1", random_dna(WINDOW, 1))])
    code, err = task_predict(capsys, str(tmp_path / "in.fa"), "--model", str(run), "--out", str(tmp_path / "p.tsv"))
    assert code == 0, err
    assert [row["id"] for row in read_table(tmp_path / "p.tsv")] == ["r1"]


def test_a_hint_names_only_forms_the_command_accepts(tmp_path, capsys):
    """``default`` is offered, in the help and in the hint, only where a promoter model can serve."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "in.fa").write_text(">r\nACGT\n")
    parsers = dict(all_parsers(build_parser()))
    for command, offered in ((["task", "predict"], True), (["chromatin", "predict"], False)):
        capsys.readouterr()
        assert main([*command, str(tmp_path / "in.fa"), "--out", str(tmp_path / "p.tsv"),
                     "--model", str(tmp_path / "empty")]) == 2
        err = capsys.readouterr().err
        assert "(RUN or RUN/model)" in err and ("--model default" in err) == offered, err
        help_text = option(parsers[f"genolong {' '.join(command)}"], "--model").help
        assert ("default for the shipped" in help_text) == offered


# -- records in windows, short and N-rich records, the table ----------------------------------
def test_a_long_record_is_read_in_windows_at_the_record_stride(run, tmp_path, capsys):
    from genolong.tasks.task import load_classifier

    long, short = random_dna(450, 2), random_dna(WINDOW, 3)
    write_fasta(tmp_path / "in.fa", [("long", long), ("fits", short)])
    code, err = task_predict(capsys, str(tmp_path / "in.fa"), "--model", str(run), "--out", str(tmp_path / "p.tsv"))
    assert code == 0, err
    rows = read_table(tmp_path / "p.tsv")
    starts = window_starts(450, WINDOW, WINDOW // 2)  # the record stride: half the window
    assert [(row["record"], row["id"], row["length"], row["windows"]) for row in rows] == [
        ("1", "long", "450", str(len(starts))), ("2", "fits", str(WINDOW), "1")]
    classifier = load_classifier(run / "model", device="cpu")
    best = classifier.probabilities([long[s : s + WINDOW] for s in starts]).max(axis=0)  # each output's best window
    np.testing.assert_allclose([float(rows[0][name]) for name in NAMES], best, rtol=1e-5)
    assert f"{len(starts) + 1} windows of {WINDOW} bp scored" in err


def test_short_and_n_rich_records_get_an_error_not_a_score(run, tmp_path, capsys):
    records = [("short", random_dna(40, 4)), ("n_rich", "N" * 150 + random_dna(40, 5)), ("ok", random_dna(80, 6))]
    write_fasta(tmp_path / "in.fa", records)
    code, err = task_predict(capsys, str(tmp_path / "in.fa"), "--model", str(run), "--out", str(tmp_path / "p.tsv"))
    assert code == 0, err
    rows = read_table(tmp_path / "p.tsv")
    assert [(row["id"], row["windows"], row["a"], row["error"]) for row in rows[:2]] == [
        ("short", "0", "", f"shorter than the model's minimum of {MIN_BP} bp"),
        ("n_rich", "0", "", "every window is more than 50% N")]
    assert rows[2]["error"] == "" and 0 < float(rows[2]["a"]) < 1
    assert "2 not scored" in err
    code, _ = task_predict(capsys, str(tmp_path / "in.fa"), "--model", str(run), "--out", str(tmp_path / "q.tsv"),
                           "--min-length", "30")
    assert code == 0 and read_table(tmp_path / "q.tsv")[0]["error"] == ""


@pytest.mark.parametrize("command", [["task", "predict"], ["predict-promoter"]])
def test_a_stride_that_would_leave_bases_unread_is_refused(command, run, tmp_path, capsys):
    from genolong.classifier.task_info import TaskInfo
    from genolong.resources import promoter_model

    model = run / "model" if command[0] == "task" else promoter_model()
    window = TaskInfo.read(model).window_bp
    write_fasta(tmp_path / "in.fa", [("r1", random_dna(4 * window, 10))])
    capsys.readouterr()
    assert main([*command, str(tmp_path / "in.fa"), "--model", str(model), "--out", str(tmp_path / "p.tsv"),
                 "--stride", str(window + 1)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(
        f"error: --stride {window + 1} is larger than the model's window of {window} bp: bases between windows "
        "would never be scored")
    assert not list(tmp_path.glob("p.tsv*"))


def test_every_prediction_table_starts_with_the_same_columns(run, tmp_path, capsys):
    write_fasta(tmp_path / "in.fa", [("r1", random_dna(WINDOW, 7))])
    code, err = task_predict(capsys, str(tmp_path / "in.fa"), "--model", str(run), "--out", str(tmp_path / "p.tsv"))
    assert code == 0, err
    assert list(read_table(tmp_path / "p.tsv")[0]) == [*FIRST_COLUMNS, *NAMES, "error"]
    assert main(["predict-promoter", str(tmp_path / "in.fa"), "--out", str(tmp_path / "promoter.tsv")]) == 0
    assert tuple(read_table(tmp_path / "promoter.tsv")[0])[:4] == FIRST_COLUMNS
    from genolong.inference.predict import writers  # every writer starts its rows with these

    assert writers.RECORD_COLUMNS == FIRST_COLUMNS == writers.PROMOTER_COLUMNS[:4] == writers.WINDOW_COLUMNS[:4]


def test_task_predict_takes_the_device_arguments_of_the_other_model_commands():
    parsers = dict(all_parsers(build_parser()))
    task, promoter = parsers["genolong task predict"], parsers["genolong predict-promoter"]
    for flag in ("--precision", "--device", "--devices", "--accelerator", "--num-nodes", "--min-length"):
        ours, theirs = option(task, flag), option(promoter, flag)
        assert ours is not None, flag
        assert (ours.type, ours.default, ours.choices, ours.help) == (theirs.type, theirs.default, theirs.choices,
                                                                      theirs.help)


@pytest.mark.parametrize("command", [["task", "predict"], ["predict-promoter"]])
def test_a_csv_name_gets_csv_and_a_tsv_name_tsv(command, run, tmp_path):
    write_fasta(tmp_path / "in.fa", [("r,1", random_dna(WINDOW, 8)), ("r2", random_dna(WINDOW, 9))])
    model = ["--model", str(run)] if command[0] == "task" else []
    for name in ("p.csv", "p.tsv"):
        assert main([*command, str(tmp_path / "in.fa"), *model, "--out", str(tmp_path / name)]) == 0
    as_csv, as_tsv = read_table(tmp_path / "p.csv", ","), read_table(tmp_path / "p.tsv")
    assert as_csv == as_tsv and [row["id"] for row in as_csv] == ["r,1", "r2"]


# -- names ------------------------------------------------------------------------------------
def test_input_regions_are_regions_and_old_spellings_warn_once(tmp_path, capsys):
    parser = build_parser()
    args = parser.parse_args(["embed", "--regions", "r.bed", "--genome", "g.fa", "--model", ".", "--out", "e.h5"])
    assert args.regions == Path("r.bed")
    capsys.readouterr()
    args = parser.parse_args(["embed", "--bed", "r.bed", "--genome", "g.fa", "--model", ".", "--out", "e.h5"])
    assert args.regions == Path("r.bed")
    assert capsys.readouterr().err == "genolong embed --bed: deprecated, use --regions\n"
    assert parser.parse_args(["explain", "in.fa", "--out", "o"]).fasta == Path("in.fa")
    args = parser.parse_args(["explain", "--fasta", "in.fa", "--out", "o"])
    assert args.fasta_option == Path("in.fa") and capsys.readouterr().err.count("deprecated") == 1


def test_no_help_prints_a_doubled_percent_sign():
    doubled = [name for name, parser in all_parsers(build_parser()) if "%%" in parser.format_help()]
    assert doubled == []


# -- the table of docs/guide/prediction.md ----------------------------------------------------
def contract_rows() -> dict[str, list[str]]:
    """The rows of the contract table in docs/guide/prediction.md: command -> its cells after the first."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "prediction.md").read_text()
    section = text.split("## One contract for every command", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `")]
    return {cells[0].strip("`"): cells[1:] for cells in rows}


def long_record_windows(tmp_path: Path, command: list[str], model: list[str], length: int) -> list[dict[str, str]]:
    """The table ``command`` writes for one record of ``length`` random bp."""
    write_fasta(tmp_path / "long.fa", [("long", random_dna(length, 11))])
    out = tmp_path / f"{'_'.join(command)}.tsv"
    assert main([*command, str(tmp_path / "long.fa"), *model, "--out", str(out)]) == 0
    return read_table(out)


def test_the_documented_contract_is_what_the_commands_do(run, tmp_path, capsys):
    from genolong.resources import promoter_model
    from genolong.tasks.task import load_classifier

    rows = contract_rows()
    parsers = dict(all_parsers(build_parser()))
    assert set(rows) == {"predict-promoter", "chromatin predict", "task predict", "scan", "score-variants",
                         "explain", "embed"}
    for command, (forms, columns, _) in rows.items():
        action = option(parsers[f"genolong {command}"], "--model")
        assert action.type(str(run)) == action.type(str(run / "model")) == run / "model", command
        offered = "`default`" in forms
        assert offered == ("default for the shipped" in action.help), command
        if offered:
            assert action.type("default") == promoter_model()
        assert ("(the default)" in forms) == (action.default == "default"), command
        assert columns.startswith("`record`, `id`, `length`, `windows`") == (command in {
            "predict-promoter", "chromatin predict", "task predict"}), command

    chromatin = random_classifier(tmp_path / "chromatin", run.parent / "tokenizer", task="chromatin",
                                  window_bp=WINDOW, min_bp=WINDOW, label_names=["p1", "p2"])
    shipped_window = load_classifier(promoter_model(), device="cpu").info.window_bp
    half = "read in windows every `--stride` bp (default: half the window)"
    assert rows["predict-promoter"][2].startswith(half) and rows["task predict"][2].startswith(half)
    length = 3 * shipped_window + 17
    table = long_record_windows(tmp_path, ["predict-promoter"], [], length)
    assert [row["windows"] for row in table] == [str(len(window_starts(length, shipped_window, shipped_window // 2)))]
    table = long_record_windows(tmp_path, ["task", "predict"], ["--model", str(run)], 450)
    assert [row["windows"] for row in table] == [str(len(window_starts(450, WINDOW, WINDOW // 2)))]
    assert "default: the model's scan stride" in rows["chromatin predict"][2] and "one row per window" in rows[
        "chromatin predict"][2]
    stride = min(load_classifier(chromatin, device="cpu").info.inference.scan_stride, WINDOW)  # at most the window
    table = long_record_windows(tmp_path, ["chromatin", "predict"], ["--model", str(chromatin)], 450)
    starts = window_starts(450, WINDOW, stride)
    assert [(row["windows"], row["start"]) for row in table] == [(str(len(starts)), str(s)) for s in starts]
    assert rows["embed"][2].startswith("refused: exit status 2")
    write_fasta(tmp_path / "long.fa", [("long", random_dna(4000, 12))])
    capsys.readouterr()
    assert main(["embed", str(tmp_path / "long.fa"), "--model", str(run), "--out", str(tmp_path / "e.h5")]) == 2
    assert not (tmp_path / "e.h5").exists()
