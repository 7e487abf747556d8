"""YAML configs are validated key by key (genolong/config.py, GenolongConfig's model section):
a typo, a wrong type, a scalar or list where a section goes, invalid YAML, an empty file and an
`extends:` cycle end in exit 2 and one line naming the file and the key, before any work."""

from __future__ import annotations

import pytest

from genolong.cli.main import main
from genolong.config import load_yaml
from genolong.datasets.corpus_build import CorpusConfig
from genolong.training.pretrain import load_pretrain_config


def run_pretrain(tmp_path, text, capsys, name="bad.yaml"):
    """`genolong pretrain --config FILE`: (exit status, stderr lines); nothing may be written."""
    config = tmp_path / name
    config.write_text(text)
    out = tmp_path / "run"
    status = main(["pretrain", "--config", str(config), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert not out.exists()
    return status, err, str(config)


def assert_one_line(status, err, *needles):
    assert status == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    for needle in needles:
        assert needle in err[0], err[0]


@pytest.mark.parametrize("text, needles", [
    ("model:\n  num_hiden_layers: 3\n", ("model.num_hiden_layers", "did you mean num_hidden_layers")),
    ("model:\n  backbone: full\n  block_size: 64\n", ("model", "block_size is a parameter of backbone")),
    ("model:\n  backbone: bigbird\n  block_siz: 64\n", ("model.block_siz", "did you mean block_size")),
    ("model:\n  max_position_embeddings: 64.7\n", ("model.max_position_embeddings must be an integer, got 64.7",)),
    ("model:\n  hidden_dropout_prob: high\n", ("model.hidden_dropout_prob must be a finite number",)),
    ("model:\n  backbone: bigbirb\n", ("model.backbone: unknown backbone 'bigbirb'",)),
    ("model: 3\n", ("model must be a mapping",)),
    ("train: [1, 2]\n", ("train must be a mapping",)),
    ("train:\n  max_step: 3\n", ("train.max_step", "did you mean max_steps")),
    ("train:\n  learning_rate: .nan\n", ("train.learning_rate must be a finite number",)),
    ("train:\n  batch_size: 0\n", ("train: batch_size must be an integer >= 1",)),
    ("max_len: '1024'\n", ("max_len must be an integer, got '1024'",)),
    ("corpus:\n  sentence_bp: 500\n", ("corpus.sentence_bp must be a list of 2 values",)),
    ("corpus:\n  encode_batch: 0\n", ("encode_batch must be >= 1",)),
    ("tokenizer:\n  min_frequency: -3\n", ("min_frequency must be >= 0",)),
    ("- a\n- b\n", ("must be a mapping", "got list")),
    ("just a string\n", ("must be a mapping", "got str")),
    ("", ("the config is empty",)),
    ("# only a comment\n", ("the config is empty",)),
    ("model: {backbone: full\n", ("invalid YAML",)),
    ("extends: [tiny]\n", ("extends must be a config name or file",)),
])
def test_bad_pretrain_config_is_refused_with_file_and_key(tmp_path, capsys, text, needles):
    status, err, path = run_pretrain(tmp_path, text, capsys)
    assert_one_line(status, err, path, *needles)


def test_extends_cycle_is_refused(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nmax_len: 1024\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    status, err, path = run_pretrain(tmp_path, "extends: a.yaml\n", capsys, name="start.yaml")
    assert_one_line(status, err, "extends makes a cycle", "a.yaml -> ", "b.yaml")


def test_self_extends_is_a_cycle(tmp_path, capsys):
    status, err, path = run_pretrain(tmp_path, "extends: self.yaml\n", capsys, name="self.yaml")
    assert_one_line(status, err, "extends makes a cycle")


def test_missing_parent_is_named(tmp_path, capsys):
    status, err, path = run_pretrain(tmp_path, "extends: nowhere.yaml\n", capsys)
    assert_one_line(status, err, "bad.yaml: extends 'nowhere.yaml', but there is no config file")


def test_a_good_config_extending_a_file_loads(tmp_path):
    (tmp_path / "base.yaml").write_text("max_len: 512\nmodel:\n  backbone: bigbird\n  hidden_size: 32\n"
                                        "  num_attention_heads: 2\n  block_size: 32\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nmodel:\n  num_hidden_layers: 1\n")
    config = load_pretrain_config(tmp_path / "child.yaml")
    assert config.max_len == 512
    assert config.model.settings == {"backbone": "bigbird", "hidden_size": 32, "num_attention_heads": 2, "block_size": 32,
                            "num_hidden_layers": 1}


def test_a_single_chromosome_is_a_one_item_list_not_characters(tmp_path):
    (tmp_path / "c.yaml").write_text("valid_chromosomes: chr17\ntest_chromosomes: chrM\n")
    config = load_yaml(tmp_path / "c.yaml", CorpusConfig)
    assert config.valid_chromosomes == ["chr17"] and config.test_chromosomes == ["chrM"]


def test_a_number_where_chromosome_names_go_is_refused(tmp_path):
    (tmp_path / "c.yaml").write_text("valid_chromosomes: 17\n")
    with pytest.raises(Exception, match=r"c.yaml: valid_chromosomes must be a list of strings, got 17"):
        load_yaml(tmp_path / "c.yaml", CorpusConfig)


def test_corpus_build_refuses_a_typo_in_its_config(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("pases: 3\n")
    out = tmp_path / "corpus"
    status = main(["corpus", "build", "--genome", str(tmp_path / "g.fa"), "--tokenizer", str(tmp_path),
                   "--out", str(out), "--config", str(tmp_path / "c.yaml")])
    assert_one_line(status, capsys.readouterr().err.strip().splitlines(), "c.yaml", "pases", "did you mean passes")
    assert not out.exists()


@pytest.mark.parametrize("text, needles", [
    ("task: promoter\nmodel:\n  num_hiden_layers: 3\n", ("model.num_hiden_layers",)),
    ("task: promoter\npatience: 2.5\n", ("patience must be an integer, got 2.5",)),
    ("task: promoter\ntest_rows: many\n", ("test_rows must be an integer or null",)),
    ("task: promoter\nkmer_baseline: 'no'\n", ("kmer_baseline must be true or false",)),
])
def test_bad_finetune_config_is_refused(tmp_path, capsys, text, needles):
    (tmp_path / "f.yaml").write_text(text)
    out = tmp_path / "run"
    status = main(["promoter", "finetune", "--data", str(tmp_path), "--config", str(tmp_path / "f.yaml"),
                   "--out", str(out)])
    assert_one_line(status, capsys.readouterr().err.strip().splitlines(), "f.yaml", *needles)
    assert not out.exists()


@pytest.mark.parametrize("text, needles", [
    ("backbones:\n  bigbird: {block_siz: 64}\n", ("backbones.bigbird.block_siz", "did you mean block_size")),
    ("backbones:\n  bigbird: {block_size: 64}\npretrain:\n  extends: tiny\n  model: {num_hiden_layers: 1}\n",
     ("model.num_hiden_layers",)),
])
def test_bad_compare_config_is_refused(tmp_path, capsys, text, needles):
    (tmp_path / "c.yaml").write_text(text + "ablation:\n  backbones: [bigbird]\n")
    out = tmp_path / "cmp"
    status = main(["compare", "--genome", str(tmp_path / "g.fa"), "--promoters", str(tmp_path),
                   "--preset", str(tmp_path / "c.yaml"), "--out", str(out)])
    assert_one_line(status, capsys.readouterr().err.strip().splitlines(), "c.yaml", *needles)
    assert not out.exists()
