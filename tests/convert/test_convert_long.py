"""``genolong convert --backbone lsg|bigbird|longformer|sled --max-length N``: LSG's conversion of a
short model (Condevaux & Harispe 2023, §3.3-3.4).

Sources: a transformers post-LN BERT and GENA-LM's pre-LN BERT (GENA-LM's config scaled down to
2 layers, hidden 32) with 128 positions and random weights. Converted to 1,024 positions with no
added global tokens, a 100-token input (two blocks of 64, which every pattern covers whole) gives
the source model's logits and hidden states to 1e-5; the position rows 128..1,023 are copies.
"""

from __future__ import annotations

import pytest
import torch
from helpers.cli import one_line
from helpers.convert import (
    copy_gena_tokenizer,
    gena_config,
    genolong_hidden_states,
    randomize,
    save_source,
    token_batch,
)
from test_convert import gena_pre_ln_reference, gena_pre_ln_state, transformers_outputs
from transformers import BertConfig, BertForMaskedLM

import genolong  # noqa: F401  (registers the genolong Auto classes)
from genolong.cli.main import main
from genolong.convert import LongSpec, convert_checkpoint
from genolong.convert.long import global_positions
from genolong.model.modeling import GenolongForMaskedLM

VOCAB, TRAINED, LONG = 32000, 128, 1024
PRE_LN = "L12-H768-A12-V32k-preln-lastln.json"


@pytest.fixture(scope="module", params=["post-LN", "pre-LN"])
def source(request, real_data, tmp_path_factory):
    """(source directory, reference: input_ids, attention_mask -> (logits, hidden states))."""
    src = tmp_path_factory.mktemp("source") / "src"
    config = gena_config(real_data, PRE_LN, max_position_embeddings=TRAINED)
    if request.param == "post-LN":
        bert = BertConfig(**{k: v for k, v in config.items() if k not in ("pre_layer_norm", "last_layer_norm")})
        model = randomize(BertForMaskedLM(bert))
        save_source(src, bert.to_dict(), model.state_dict(), safetensors=True)

        def reference(ids, mask):
            return transformers_outputs(model, ids, mask)
    else:
        state = gena_pre_ln_state(config, last_layer_norm=True)
        save_source(src, config, state, safetensors=False)

        @torch.no_grad()
        def reference(ids, mask):
            return gena_pre_ln_reference(state, config, ids, mask, last_layer_norm=True)
    copy_gena_tokenizer(real_data, src)
    return src, reference


def max_difference(ours, theirs, mask) -> float:
    """Max abs difference of the logits and of every layer's hidden states at real tokens."""
    real = mask.bool()
    pairs = [(ours[0], theirs[0]), *zip(ours[1], theirs[1], strict=True)]
    return max((a[real] - b[real]).abs().max().item() for a, b in pairs)


@pytest.mark.parametrize("backbone", ["lsg", "bigbird", "longformer"])
def test_short_input_gives_the_source_outputs_and_positions_are_copies(source, backbone, tmp_path):
    src, reference = source
    model = convert_checkpoint(src, tmp_path / "long", long=LongSpec(backbone, LONG))
    assert model.config.backbone == backbone and model.config.max_position_embeddings == LONG
    assert model.config.trained_positions == TRAINED
    positions = model.genolong.encoder.embeddings.position.weight
    assert torch.equal(positions[TRAINED:], positions[:TRAINED].repeat(LONG // TRAINED - 1, 1))
    reloaded = GenolongForMaskedLM.from_pretrained(str(tmp_path / "long")).eval()
    ids, mask = token_batch([100], VOCAB, seed=3)
    assert max_difference(genolong_hidden_states(reloaded, ids, mask), reference(ids, mask), mask) <= 1e-5


def test_long_inputs_run_and_a_sled_model_reads_2000_tokens(source, tmp_path):
    src, reference = source
    lsg = convert_checkpoint(src, tmp_path / "lsg", long=LongSpec("lsg", LONG, global_tokens=1))
    sled = convert_checkpoint(src, tmp_path / "sled", long=LongSpec("sled", block_size=TRAINED))
    assert sled.config.max_position_embeddings == TRAINED and sled.config.sled_chunk_size == TRAINED
    ids, mask = token_batch([2000], VOCAB, seed=4)
    with torch.no_grad():
        logits = sled(input_ids=ids, attention_mask=mask).logits
        assert logits.shape == (1, 2000, VOCAB) and bool(logits.isfinite().all())
        assert bool(lsg(input_ids=ids[:, :LONG], attention_mask=mask[:, :LONG]).logits.isfinite().all())
    short_ids, short_mask = token_batch([100], VOCAB, seed=5)
    assert max_difference(genolong_hidden_states(sled, short_ids, short_mask), reference(short_ids, short_mask),
                          short_mask) <= 1e-5


def test_global_tokens_start_from_cls_and_mask_with_positions(source, tmp_path):
    """LSG §3.3: global 0 = [CLS] + position 0, global i = [MASK] + position reorder(i), through the
    embedding LayerNorm (genolong prepends them after it): what the source's embedding layer gives."""
    src, _ = source
    model = convert_checkpoint(src, tmp_path / "lsg", long=LongSpec("lsg", LONG, global_tokens=3))
    config, embeddings = model.config, model.genolong.encoder.embeddings
    assert global_positions(4, TRAINED) == [0, 64, 1, 65]
    ids = torch.tensor([config.cls_token_id, config.mask_token_id, config.mask_token_id])
    with torch.no_grad():
        expected = embeddings.norm(embeddings.token(ids) + embeddings.position(torch.tensor([0, 64, 1])))
    torch.testing.assert_close(model.genolong.encoder.global_tokens, expected, rtol=0, atol=1e-6)


def test_a_genolong_full_model_directory_converts_too(source, tmp_path):
    src, reference = source
    convert_checkpoint(src, tmp_path / "full")
    model = convert_checkpoint(tmp_path / "full", tmp_path / "lsg", long=LongSpec("lsg", 512, block_size=32))
    assert (model.config.block_size, model.config.max_position_embeddings) == (32, 512)
    ids, mask = token_batch([60], VOCAB, seed=6)
    assert max_difference(genolong_hidden_states(model, ids, mask), reference(ids, mask), mask) <= 1e-5


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--backbone", "lsg", "--max-length", "1000"], "--max-length 1000 is not a multiple of 64"),
        (["--backbone", "bigbird", "--max-length", "1024", "--block-size", "128"],
         "--block-size 128 is larger than half the 128 trained positions"),
        (["--backbone", "lsg", "--max-length", "1024", "--block-size", "96"], "larger than half"),
        (["--backbone", "longformer", "--max-length", "1024", "--block-size", "256"], "one-sided window"),
        (["--backbone", "bigbird", "--max-length", "1024", "--global-tokens", "1"], "ITC"),
        (["--backbone", "full", "--max-length", "1024", "--global-tokens", "1"], "full attention has no global tokens"),
        (["--backbone", "vcc", "--max-length", "1024"], "--backbone must be one of bigbird, full, longformer, lsg, sled"),
        (["--backbone", "sled", "--max-length", "1024"], "--max-length does not apply to sled"),
        (["--backbone", "lsg"], "needs --max-length"),
        (["--max-length", "1024"], "go with --backbone"),
    ],
)
def test_impossible_long_conversions_are_refused_in_one_line(source, arguments, message, tmp_path, capsys):
    src, _ = source
    assert main(["convert", str(src), "--out", str(tmp_path / "out"), *arguments]) == 2
    one_line(capsys, message)
    assert not (tmp_path / "out").exists()


def test_the_log_states_the_new_positions(source, tmp_path, capsys, caplog):
    src, _ = source
    with caplog.at_level("INFO", logger="genolong"):
        assert main(["convert", str(src), "--out", str(tmp_path / "out"), "--backbone", "lsg", "--max-length",
                     str(LONG)]) == 0
    assert "lsg: positions 128 -> 1024 (rows 128..1023 copy rows 0..127), block 64" in caplog.text
    assert "1024 positions, backbone lsg" in capsys.readouterr().out
