"""``--model`` of every command (genolong/cli/arguments.py): a model directory, a run directory
holding ``model/``, or ``default`` (the shipped promoter model, also what a left-out ``--model`` means
wherever a promoter model can serve); hints name the path a command wants."""

from __future__ import annotations

import shutil

import pytest

from genolong.cli.main import build_parser, main
from genolong.dna.sequence import read_fasta, write_fasta
from genolong.resources import promoter_model

#: Every command that takes --model, with its other required arguments.
CLASSIFIER_COMMANDS = {
    "predict-promoter": ["predict-promoter", "in.fa"],
    "promoter predict": ["promoter", "predict", "in.fa"],
    "scan": ["scan", "--genome", "g.fa", "--out", "o.bw"],
    "score-variants": ["score-variants", "--vcf", "v.vcf", "--genome", "g.fa", "--out", "o.tsv"],
    "explain": ["explain", "in.fa", "--out", "o"],
}
CHROMATIN_COMMANDS = {
    "chromatin predict": ["chromatin", "predict", "in.fa", "--out", "o.tsv"],
    "chromatin eval": ["chromatin", "eval", "--data", "d", "--out", "a.csv"],
}
FINETUNE_COMMANDS = {
    "promoter finetune": ["promoter", "finetune", "--data", "d", "--out", "o"],
    "chromatin finetune": ["chromatin", "finetune", "--data", "d", "--out", "o"],
}


@pytest.fixture
def run_dir(tmp_path):
    """A fine-tuning run directory: the shipped model copied to RUN/model."""
    shutil.copytree(promoter_model(), tmp_path / "run" / "model")
    return tmp_path / "run"


@pytest.mark.parametrize("argv", [*CLASSIFIER_COMMANDS.values(), *CHROMATIN_COMMANDS.values(),
                                  *FINETUNE_COMMANDS.values()], ids=lambda argv: " ".join(argv[:2]))
def test_a_run_directory_stands_for_its_model(argv, run_dir):
    parser = build_parser()
    assert parser.parse_args([*argv, "--model", str(run_dir)]).model == run_dir / "model"
    assert parser.parse_args([*argv, "--model", str(run_dir / "model")]).model == run_dir / "model"


@pytest.mark.parametrize("argv", [*CLASSIFIER_COMMANDS.values(), *CHROMATIN_COMMANDS.values()],
                         ids=lambda argv: " ".join(argv[:2]))
def test_default_names_the_shipped_model_in_every_command(argv):
    parser = build_parser()
    assert parser.parse_args([*argv, "--model", "default"]).model == promoter_model()
    if argv in CLASSIFIER_COMMANDS.values():  # left out: the same model
        assert parser.parse_args(argv).model == promoter_model()
    else:  # no shipped chromatin model: still required
        with pytest.raises(SystemExit):
            parser.parse_args(argv)


def test_predict_from_a_run_directory_and_a_hint_that_names_the_right_path(run_dir, real_data, tmp_path, capsys):
    records = [(r.name, r.sequence) for _, r in zip(range(2), read_fasta(real_data / "promoters" / "Mouse_tata.fa"),
                                                    strict=False)]
    write_fasta(tmp_path / "in.fa", records)
    assert main(["predict-promoter", str(tmp_path / "in.fa"), "--model", str(run_dir), "--out",
                 str(tmp_path / "p.tsv")]) == 0
    assert f"# model {run_dir / 'model'}; threshold" in (tmp_path / "p.tsv").read_text()
    pretrained = tmp_path / "pretrain"
    shutil.copytree(run_dir / "model", pretrained / "model", ignore=shutil.ignore_patterns("genolong_task.json"))
    capsys.readouterr()
    assert main(["predict-promoter", str(tmp_path / "in.fa"), "--model", str(pretrained)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a pretrained model, not a fine-tuned classifier" in err
    assert f"--model {pretrained / 'model'} --out RUN`, then give --model RUN" in err
