"""Loading a model directory is all or nothing (genolong/model/loading.py): broken files, weights
that did not load and a tokenizer that is not the model's end in exit 2 and one line, through
`genolong predict-promoter`, `eval` and `finetune --model`; models load and predict under
``torch.inference_mode()``."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from helpers.classify import promoter_dataset, random_promoter_model
from safetensors.torch import load_file, save_file

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.cli.main import main
from genolong.core.errors import InputError
from genolong.dna.sequence import write_fasta
from genolong.dna.tokenizer import (
    TokenizerTrainConfig,
    load_tokenizer,
    tokenizer_fingerprint,
    train_tokenizer,
)
from genolong.model.configuration import GenolongConfig
from genolong.model.loading import load_model, read_model_config, save_model
from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification
from genolong.resources import sample_genome

SEQUENCE = "ACGTTGCAAT" * 30


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return random_promoter_model(tmp_path_factory, window_bp=251)


@pytest.fixture(scope="module")
def tokenizer_dir(model_dir):
    return model_dir.parent / "tokenizer"


@pytest.fixture
def fasta(tmp_path):
    path = tmp_path / "in.fa"
    write_fasta(path, [("seq1", SEQUENCE)])
    return path


@pytest.fixture
def broken(model_dir, tmp_path):
    """A copy of the model directory to break."""
    return shutil.copytree(model_dir, tmp_path / "broken")


def predict(model, fasta, capsys):
    """Run predict-promoter; return (exit status, stderr lines, whether the output exists)."""
    out = fasta.parent / "preds.tsv"
    status = main(["predict-promoter", str(fasta), "--model", str(model), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    return status, err, out.exists()


def assert_refused(status, err, written, *needles):
    assert status == 2 and not written
    assert len(err) == 1 and "Traceback" not in err[0], err
    for needle in needles:
        assert needle in err[0], err[0]


# -- the fingerprint --------------------------------------------------------------------------
def test_fingerprint_is_stable_and_sees_two_swapped_ids(tokenizer_dir, tmp_path):
    tokenizer = load_tokenizer(tokenizer_dir)
    fingerprint = tokenizer_fingerprint(tokenizer)
    assert len(fingerprint) == 64 and fingerprint == tokenizer_fingerprint(load_tokenizer(tokenizer_dir))
    tokenizer.save_pretrained(str(tmp_path / "resaved"))
    assert tokenizer_fingerprint(load_tokenizer(tmp_path / "resaved")) == fingerprint
    swapped = swap_two_ids(tokenizer_dir, tmp_path / "swapped")
    assert tokenizer_fingerprint(load_tokenizer(swapped)) != fingerprint


def swap_two_ids(source, target):
    """A copy of tokenizer directory ``source`` whose two longest tokens have swapped ids."""
    shutil.copytree(source, target, dirs_exist_ok=True)
    spec = json.loads((target / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    a, b = sorted(vocab, key=len)[-2:]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (target / "tokenizer.json").write_text(json.dumps(spec))
    return target


def test_every_save_stamps_the_fingerprint(model_dir, tokenizer_dir):
    stored = json.loads((model_dir / "config.json").read_text())["tokenizer_fingerprint"]
    assert stored == tokenizer_fingerprint(load_tokenizer(tokenizer_dir))


def test_the_shipped_model_carries_its_fingerprint():
    directory = default_promoter_model()
    stored = json.loads((directory / "config.json").read_text())["tokenizer_fingerprint"]
    assert stored == tokenizer_fingerprint(load_tokenizer(directory))
    Classifier.load(directory, task="promoter", device="cpu")


# -- predict-promoter on broken directories ---------------------------------------------------
def test_a_good_model_predicts(model_dir, fasta, capsys):
    status, err, written = predict(model_dir, fasta, capsys)
    assert status == 0 and written


def test_tokenizer_with_two_ids_swapped_is_refused(broken, tokenizer_dir, fasta, capsys):
    swap_two_ids(tokenizer_dir, broken)
    assert_refused(*predict(broken, fasta, capsys), "tokenizer.json", "not the tokenizer the model was trained with")


def test_tokenizer_of_another_size_is_refused_even_without_a_fingerprint(broken, tmp_path, fasta, capsys):
    train_tokenizer(sample_genome(), tmp_path / "other", TokenizerTrainConfig(vocab_size=48, sample_bp=20_000),
                    show_progress=False)
    shutil.copy(tmp_path / "other" / "tokenizer.json", broken / "tokenizer.json")
    config = json.loads((broken / "config.json").read_text())
    config.pop("tokenizer_fingerprint")
    (broken / "config.json").write_text(json.dumps(config))
    assert_refused(*predict(broken, fasta, capsys), "tokenizer.json", "48 tokens for a model of vocab_size=64")


def test_a_directory_saved_before_fingerprints_loads_with_a_warning(broken, fasta, capsys, caplog):
    config = json.loads((broken / "config.json").read_text())
    config.pop("tokenizer_fingerprint")
    (broken / "config.json").write_text(json.dumps(config))
    status, _, written = predict(broken, fasta, capsys)
    assert status == 0 and written
    assert "saved without a tokenizer fingerprint" in caplog.text


def test_renamed_weight_is_refused(broken, fasta, capsys):
    weights = load_file(broken / "model.safetensors")
    weights["classifier.renamed.weight"] = weights.pop("classifier.classifier.weight")
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    assert_refused(*predict(broken, fasta, capsys), "model.safetensors", "1 missing (classifier.classifier.weight)",
                   "1 unexpected (classifier.renamed.weight)")


def test_weight_of_another_shape_is_refused(broken, fasta, capsys):
    weights = load_file(broken / "model.safetensors")
    weights["classifier.classifier.bias"] = torch.zeros(3)
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    assert_refused(*predict(broken, fasta, capsys), "model.safetensors", "classifier.classifier.bias")


@pytest.mark.parametrize("keep", [0, 7, 1000])
def test_missing_or_truncated_weights_are_refused(broken, fasta, capsys, keep):
    path = broken / "model.safetensors"
    if keep:
        path.write_bytes(path.read_bytes()[:keep])
    else:
        path.unlink()
    assert_refused(*predict(broken, fasta, capsys), "model.safetensors")


@pytest.mark.parametrize("text, needle", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "not a genolong model config"),
    ('{"model_type": "bert"}', "not a genolong model config"),
    ('{"model_type": "genolong", "hidden_size": "big"}', "hidden_size must be a positive integer"),
])
def test_broken_config_json_is_refused(broken, fasta, capsys, text, needle):
    (broken / "config.json").write_text(text)
    assert_refused(*predict(broken, fasta, capsys), "config.json", needle)


@pytest.mark.parametrize("text", ["{", "[]", "{}", '{"model": 3}', '{"model": {"type": "BPE", "vocab": {"A": 0}, '
                                  '"merges": [["A", "C"]]}}'])
def test_broken_tokenizer_json_is_refused(broken, fasta, capsys, text):
    (broken / "tokenizer.json").write_text(text)
    assert_refused(*predict(broken, fasta, capsys), "tokenizer.json")


def test_eval_refuses_a_model_with_a_missing_weight(model_dir, tmp_path, capsys):
    broken = shutil.copytree(model_dir, tmp_path / "chromatin")
    info = json.loads((broken / "genolong_task.json").read_text()) | {"task": "chromatin"}
    (broken / "genolong_task.json").write_text(json.dumps(info))
    weights = load_file(broken / "model.safetensors")
    weights.pop("genolong.encoder.embeddings.position.weight")
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    out = tmp_path / "aucs.csv"
    status = main(["chromatin", "eval", "--model", str(broken), "--data", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert_refused(status, err, out.exists(), "genolong.encoder.embeddings.position.weight")


# -- fine-tuning from a pretrained model ------------------------------------------------------
@pytest.fixture(scope="module")
def pretrained(tokenizer_dir, tmp_path_factory):
    """A random MLM saved as `genolong pretrain` does, with its tokenizer."""
    tokenizer = load_tokenizer(tokenizer_dir)
    config = GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=128)
    out = tmp_path_factory.mktemp("pretrained") / "model"
    out.mkdir()
    save_model(GenolongForMaskedLM(config), tokenizer, out)
    return out


def test_finetune_loads_the_encoder_and_drops_only_the_mlm_head(pretrained):
    config = read_model_config(pretrained, num_labels=1, backbone="bigbird", block_size=16, num_random_blocks=1)
    model = load_model(GenolongForSequenceClassification, pretrained, config=config,
                       new={"classifier.", "genolong.encoder.blocks.0.attention.random_block_draws"},
                       dropped={"lm_head."})
    saved = load_file(pretrained / "model.safetensors")
    assert torch.equal(model.genolong.encoder.embeddings.token.weight, saved["genolong.encoder.embeddings.token.weight"])
    with pytest.raises(InputError, match=r"3 unexpected \(lm_head.decoder.bias"):
        load_model(GenolongForSequenceClassification, pretrained, config=config,
                   new={"classifier.", "genolong.encoder.blocks.0.attention.random_block_draws"},
                   dropped={"lm_head.dense."})


def test_finetune_refuses_a_pretrained_model_with_a_missing_weight(pretrained, real_data, tmp_path, capsys):
    broken = shutil.copytree(pretrained, tmp_path / "pretrained")
    weights = load_file(broken / "model.safetensors")
    weights.pop("genolong.encoder.blocks.0.qkv.weight")
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    data = promoter_dataset(real_data, tmp_path / "data", positives=20, negatives=20)
    out = tmp_path / "run"
    status = main(["promoter", "finetune", "--data", str(data), "--model", str(broken), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert_refused(status, err, (out / "model").exists(), "1 missing (genolong.encoder.blocks.0.qkv.weight)")


# -- inference_mode ---------------------------------------------------------------------------
@pytest.mark.parametrize("backbone, params", [("bigbird", {"block_size": 16, "num_random_blocks": 1}),
                                              ("lsg", {"block_size": 16, "sparse_block_size": 16})])
def test_model_built_and_loaded_under_inference_mode_predicts(tokenizer_dir, tmp_path, backbone, params):
    tokenizer = load_tokenizer(tokenizer_dir)
    config = GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=128, backbone=backbone, num_labels=1,
                            hidden_dropout_prob=0.0, **params)
    ids = torch.randint(5, len(tokenizer), (2, 64))
    with torch.inference_mode():
        built = GenolongForSequenceClassification(config).eval()
        expected = built(ids).logits
        save_model(built, tokenizer, tmp_path)
        loaded = load_model(GenolongForSequenceClassification, tmp_path)
        assert torch.allclose(loaded(ids).logits, expected, atol=1e-6)
    assert torch.allclose(load_model(GenolongForSequenceClassification, tmp_path)(ids).logits, expected, atol=1e-6)


@pytest.mark.parametrize("change, needle", [
    (lambda info: [info], "format is not"),
    (lambda info: info | {"window_bp": "wide"}, "window_bp must be an integer, got 'wide'"),
    (lambda info: info | {"max_len": 100_000}, "max_len=100000 exceeds the model's max_position_embeddings"),
])
def test_broken_task_description_is_refused(broken, fasta, capsys, change, needle):
    info = json.loads((broken / "genolong_task.json").read_text())
    (broken / "genolong_task.json").write_text(json.dumps(change(info)))
    assert_refused(*predict(broken, fasta, capsys), "genolong_task.json", needle)


@pytest.mark.parametrize("positions", ["rotary", "alibi"])
def test_a_saved_model_with_rotary_or_alibi_positions_reloads_the_same_function(positions, tmp_path):
    """The rotary frequencies and ALiBi slopes are derived, not saved: ``from_pretrained`` must
    recompute them rather than leave the memory it allocated."""
    torch.manual_seed(0)
    config = GenolongConfig(vocab_size=30, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=64, backbone="full",
                            position_embedding_type=positions)
    model = GenolongForMaskedLM(config).eval()
    model.save_pretrained(str(tmp_path))
    reloaded = GenolongForMaskedLM.from_pretrained(str(tmp_path)).eval()
    ids = torch.randint(5, 30, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=ids).logits, model(input_ids=ids).logits)
