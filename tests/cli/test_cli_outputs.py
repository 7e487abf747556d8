"""The output policy of every command (genolong/cli/outputs.py), through the CLI: occupied output
directories, outputs that are inputs, unusable output locations and partial outputs after a
user error. Each test runs the user's command and checks the exit status, the one line on
stderr and the file system afterwards."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers.classify import tiny_tokenizer
from helpers.deepsea import deepsea_rows, write_bundle

from genolong.classifier.directory import default_promoter_model
from genolong.cli.main import build_parser, main
from genolong.cli.outputs import PathRoles
from genolong.core.files import MARKER
from genolong.dna.sequence import read_fasta, write_fasta


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")


@pytest.fixture(scope="module")
def promoter_model(tmp_path_factory):
    """A copy of the promoter model shipped with genolong (a test may try to write into it)."""
    return Path(shutil.copytree(default_promoter_model(), tmp_path_factory.mktemp("model") / "promoter"))


@pytest.fixture
def mouse_fasta(real_data, tmp_path):
    """Three real mouse TATA promoters (251 bp) in a FASTA of the test's own."""
    records = [r for _, r in zip(range(3), read_fasta(real_data / "promoters" / "Mouse_tata.fa"), strict=False)]
    path = tmp_path / "in.fa"
    write_fasta(path, records)
    return path


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with the SHA-256 of its content (the kind for anything but files)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink()
        else "dir" if p.is_dir() else "link" if p.is_symlink() else "special"
        for p in sorted(root.rglob("*"))
    }


def run_cli(capsys, *argv) -> tuple[int, str]:
    """Exit status and the message of ``genolong ARGV``: with status 2, the one error line
    (progress bars may precede it on stderr; a traceback may not)."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    if code == 2:
        assert "Traceback" not in err, err
        err = err.splitlines()[-1]
        assert err.startswith("genolong ") and ": error: " in err, err
    return code, err


# -- occupied output directories ---------------------------------------------------------------
def user_directory(root: Path) -> Path:
    """A directory of the user's that looks like a run directory: model/ with a file, a report."""
    (root / "model").mkdir(parents=True)
    (root / "model" / "notes.txt").write_text("my notes\n")
    (root / "report.json").write_text('{"mine": true}\n')
    (root / "comparison.csv").write_text("backbone,f1\nmine,1.0\n")
    return root


@pytest.mark.parametrize("command", [
    ["promoter", "finetune", "--data", "{data}"],
    ["chromatin", "finetune", "--data", "{data}"],
    ["pretrain", "--genome", "{genome}"],
    ["compare", "--genome", "{genome}", "--promoters", "{data}", "--preset", "micro"],
    ["context-ablation", "--genome", "{genome}", "--preset", "micro"],
    ["corpus", "build", "--genome", "{genome}", "--tokenizer", "{data}"],
    ["bench", "attention"],
    ["promoter", "prepare", "--text", "{genome}", "--overwrite"],
    ["tokenizer", "train", "--genome", "{genome}", "--force"],
    ["chromatin", "prepare", "--mat-dir", "{data}"],
])
def test_an_output_directory_genolong_did_not_make_is_refused_untouched(tmp_path, capsys, command):
    out = user_directory(tmp_path / "my dir")
    before = snapshot(out)
    values = {"data": tmp_path / "data", "genome": tmp_path / "g.fa"}
    code, err = run_cli(capsys, *[part.format(**values) for part in command], "--out", out)
    assert code == 2
    assert f"--out {out} holds files genolong did not write" in err
    assert snapshot(out) == before


def test_another_kind_of_genolong_directory_is_refused(tmp_path, capsys, tokenizer_dir):
    code, err = run_cli(capsys, "pretrain", "--genome", tmp_path / "g.fa", "--out", tokenizer_dir)
    assert code == 2 and "holds a genolong tokenizer run, not a pretrain run" in err
    assert (tokenizer_dir / "tokenizer.json").is_file()


def test_a_run_directory_is_claimed_and_resumed(real_data, tokenizer_dir, tmp_path, capsys):
    """corpus build into a new directory marks it; the same command again resumes there."""
    genome = real_data / "genomes" / "chr17.hg19.part.fa"
    argv = ["corpus", "build", "--genome", genome, "--tokenizer", tokenizer_dir, "--out", tmp_path / "c",
            "--passes", "1", "--valid-chromosomes", "chrX", "--test-chromosomes", "chrY", "--valid-tail-fraction", "0.1",
            "--test-tail-fraction", "0.1"]  # a corpus needs documents in every split
    assert run_cli(capsys, *argv)[0] == 0
    assert json.loads((tmp_path / "c" / MARKER).read_text())["kind"] == "corpus"
    built = snapshot(tmp_path / "c")
    assert run_cli(capsys, *argv)[0] == 0  # finished shards are read back, not rebuilt
    assert {k: v for k, v in snapshot(tmp_path / "c").items() if "corpus.json" not in k} == \
        {k: v for k, v in built.items() if "corpus.json" not in k}


def test_an_empty_existing_directory_is_usable_and_emptied_again_after_an_error(tmp_path, tokenizer_dir, capsys):
    out = tmp_path / "empty"
    out.mkdir()
    (tmp_path / "short.fa").write_text(">chr1\n" + "ACGT" * 12 + "\n")
    code, err = run_cli(capsys, "corpus", "build", "--genome", tmp_path / "short.fa", "--tokenizer", tokenizer_dir,
                        "--out", out)
    assert code == 2 and "short.fa" in err
    assert out.is_dir() and list(out.iterdir()) == []


# -- nothing partial after exit 2 --------------------------------------------------------------
def test_a_failed_pretrain_leaves_nothing(tmp_path, capsys):
    """A 50-bp genome: the tokenizer trains, the corpus fails; nothing of the run stays."""
    (tmp_path / "short.fa").write_text(">chr1\n" + "ACGTTGCA" * 6 + "AC\n")
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, "pretrain", "--genome", tmp_path / "short.fa", "--out", tmp_path / "runs" / "r")
    assert code == 2 and "no usable sequence" in err
    assert snapshot(tmp_path) == before


def test_a_failed_corpus_build_leaves_nothing(tmp_path, tokenizer_dir, capsys):
    (tmp_path / "short.fa").write_text(">chr1\n" + "ACGTTGCA" * 6 + "AC\n")
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, "corpus", "build", "--genome", tmp_path / "short.fa", "--tokenizer", tokenizer_dir,
                        "--out", tmp_path / "corpus")
    assert code == 2 and "no usable sequence" in err
    assert snapshot(tmp_path) == before


def test_a_failed_chromatin_prepare_leaves_no_work_directory(real_data, tmp_path, capsys):
    """The genome turns out invalid while the rows are being located: the hidden
    ``.o.partial`` work directory (kept for a resume after an interrupt) goes too."""
    bundle = write_bundle(tmp_path / "mat", *deepsea_rows(real_data))
    (tmp_path / "genome.fa").write_text(">chr1\nACGTXACGT\n")
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, "chromatin", "prepare", "--mat-dir", bundle, "--out", tmp_path / "o",
                        "--genome", tmp_path / "genome.fa")
    assert code == 2 and "invalid character 'X'" in err
    assert snapshot(tmp_path) == before


def test_bench_refuses_an_impossible_configuration_before_measuring(tmp_path, capsys):
    code, err = run_cli(capsys, "bench", "attention", "--backbones", "bigbird", "--peers", "--no-floor",
                        "--lengths", "100", "--extra-lengths", "--out", tmp_path / "bench")
    assert code == 2 and "bigbird at length 100" in err and "does not divide" in err
    assert not (tmp_path / "bench").exists()


# -- outputs that are inputs, or each other ----------------------------------------------------
def test_predict_refuses_to_write_over_its_input(promoter_model, mouse_fasta, tmp_path, capsys):
    original = mouse_fasta.read_bytes()
    (tmp_path / "link.fa").symlink_to(mouse_fasta)
    os.link(mouse_fasta, tmp_path / "hard.fa")
    for out in (mouse_fasta, tmp_path / "link.fa", tmp_path / "hard.fa"):
        code, err = run_cli(capsys, "predict-promoter", mouse_fasta, "--model", promoter_model, "--out", out)
        assert code == 2 and f"--out {out} is the input fasta {mouse_fasta}" in err
    for flag in ("--windows", "--bed"):
        code, err = run_cli(capsys, "predict-promoter", mouse_fasta, "--model", promoter_model,
                            "--out", tmp_path / "p.tsv", flag, mouse_fasta)
        assert code == 2 and f"{flag} {mouse_fasta} is the input" in err
    assert mouse_fasta.read_bytes() == original
    assert (tmp_path / "link.fa").is_symlink() and not (tmp_path / "p.tsv").exists()


def test_two_outputs_on_one_path_are_refused(promoter_model, mouse_fasta, tmp_path, capsys):
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, "predict-promoter", mouse_fasta, "--model", promoter_model,
                        "--out", tmp_path / "same.tsv", "--bed", tmp_path / "." / "same.tsv")
    assert code == 2 and "--out and --bed name the same path" in err
    code, err = run_cli(capsys, "predict-promoter", mouse_fasta, "--model", promoter_model,
                        "--out", "-", "--windows", "-")
    assert code == 2 and "only one output can go to standard output (-), not --out and --windows" in err
    assert snapshot(tmp_path) == before


def test_an_output_file_inside_an_input_directory_is_refused(promoter_model, mouse_fasta, capsys):
    config = promoter_model / "config.json"
    original = config.read_bytes()
    code, err = run_cli(capsys, "chromatin", "predict", mouse_fasta, "--model", promoter_model, "--out", config)
    assert code == 2 and f"is a file of the input --model {promoter_model}" in err
    assert config.read_bytes() == original


def test_tokenizer_stats_json_over_its_genome_is_refused(tokenizer_dir, mouse_fasta, capsys):
    original = mouse_fasta.read_bytes()
    code, err = run_cli(capsys, "tokenizer", "stats", "--tokenizer", tokenizer_dir, "--genome", mouse_fasta,
                        "--json", mouse_fasta)
    assert code == 2 and "--json" in err and "is the input --genome" in err
    assert mouse_fasta.read_bytes() == original


def test_an_output_directory_holding_an_input_is_refused(tmp_path, capsys):
    (tmp_path / "g.fa").write_text(">chr1\nACGT\n")
    for out in (tmp_path, Path("/")):
        code, err = run_cli(capsys, "pretrain", "--genome", tmp_path / "g.fa", "--out", out)
        assert code == 2 and f"--out {out} is or holds the input --genome" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa"]


# -- unusable output locations, before the work ------------------------------------------------
FILE_COMMANDS = {
    "predict-promoter": ["predict-promoter", "{fasta}", "--out"],
    "chromatin predict": ["chromatin", "predict", "{fasta}", "--model", "{model}", "--out"],
    "chromatin eval": ["chromatin", "eval", "--model", "{model}", "--data", "{data}", "--out"],
    "promoter baseline": ["promoter", "baseline", "--data", "{data}", "--out"],
    "tokenizer stats": ["tokenizer", "stats", "--tokenizer", "{model}", "--genome", "{fasta}", "--json"],
    "genome prepare": ["genome", "prepare", "{fasta}", "--out"],
}
DIRECTORY_COMMANDS = {
    "pretrain": ["pretrain", "--out"],
    "finetune": ["promoter", "finetune", "--data", "{data}", "--out"],
    "bench": ["bench", "attention", "--out"],
    "corpus build": ["corpus", "build", "--genome", "{fasta}", "--tokenizer", "{model}", "--out"],
    "tokenizer train": ["tokenizer", "train", "--out"],
    "promoter prepare": ["promoter", "prepare", "--text", "{fasta}", "--out"],
    "chromatin prepare": ["chromatin", "prepare", "--mat-dir", "{data}", "--out"],
    "compare": ["compare", "--genome", "{fasta}", "--promoters", "{data}", "--out"],
    "data fetch": ["data", "fetch", "epdnew", "--offline", "--dest"],
}


def _command(template: list[str], tmp_path: Path) -> list[str]:
    values = {"fasta": tmp_path / "in.fa", "model": tmp_path / "model", "data": tmp_path / "data"}
    return [part.format(**values) for part in template]


def _locations(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "a file").write_text("mine\n")
    (tmp_path / "a dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    return {
        "directory for a file": (tmp_path / "a dir", "is a directory"),
        "file for a directory": (tmp_path / "a file", "is a file, not a directory"),
        "file as a parent": (tmp_path / "a file" / "x", "is a file, not a directory"),
        "fifo": (tmp_path / "fifo", "not a regular file"),
        "pseudo file system": (Path("/proc/genolong-out"), "cannot write in /proc"),
        "name too long": (tmp_path / ("n" * 250), "is too long for the file system"),
        "broken symlink": (tmp_path / "broken", "a broken symbolic link"),
    }


@pytest.mark.parametrize("name", [*FILE_COMMANDS, *DIRECTORY_COMMANDS])
def test_unusable_output_locations_are_one_line_before_any_work(name, tmp_path, capsys):
    """The inputs named here do not exist: the output is refused before any input is read."""
    directory = name in DIRECTORY_COMMANDS
    template = (DIRECTORY_COMMANDS if directory else FILE_COMMANDS)[name]
    locations = _locations(tmp_path)
    del locations["file for a directory" if not directory else "directory for a file"]
    if directory:
        del locations["fifo"]  # not a directory: the same refusal as a file
    before = snapshot(tmp_path)
    for where, (path, message) in locations.items():
        code, err = run_cli(capsys, *_command(template, tmp_path), path)
        assert code == 2 and str(path) in err and message in err, (where, err)
    assert snapshot(tmp_path) == before
    assert (tmp_path / "fifo").is_fifo()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only directories")
def test_a_read_only_directory_is_refused(tmp_path, capsys):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    code, err = run_cli(capsys, "predict-promoter", tmp_path / "in.fa", "--out", tmp_path / "ro" / "p.tsv")
    assert code == 2 and "cannot write in" in err
    code, err = run_cli(capsys, "pretrain", "--out", tmp_path / "ro" / "run")
    assert code == 2 and "cannot write in" in err


def test_paths_with_spaces_and_new_parents_work(promoter_model, mouse_fasta, tmp_path, capsys):
    out = tmp_path / "new dir" / "my predictions.tsv"
    code, _ = run_cli(capsys, "predict-promoter", mouse_fasta, "--model", promoter_model, "--out", out,
                      "--bed", tmp_path / "new dir" / "p.bed")
    assert code == 0
    comment, _, *rows = out.read_text().splitlines()
    assert comment.startswith("# model ") and len(rows) == 4 and rows[0].startswith("record\tid\tlength")
    assert sorted(p.name for p in out.parent.iterdir()) == ["my predictions.tsv", "p.bed"]


# -- the declaration itself --------------------------------------------------------------------
def _leaf_parsers(parser: argparse.ArgumentParser, name: str = "genolong"):
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield name, parser
    for action in subparsers:
        for sub_name, sub in action.choices.items():
            yield from _leaf_parsers(sub, f"{name} {sub_name}")


def test_every_path_argument_of_every_command_has_a_declared_role():
    """A new command cannot forget the output policy: each Path argument is an input or an output."""
    for name, parser in _leaf_parsers(build_parser()):
        paths = {a.dest for a in parser._actions if a.type is Path}
        if not paths:
            continue
        roles = parser.get_default("path_roles")
        assert isinstance(roles, PathRoles), (
            f"{name} declares no path roles: call genolong.cli.outputs.declare(parser, run, inputs=..., files=..., "
            "directories=...) in its register()")
        declared = {*roles.inputs, *roles.files, *roles.directories}
        assert paths <= declared, f"{name}: undeclared {sorted(paths - declared)}"
