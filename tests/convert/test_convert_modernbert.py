"""``genolong convert`` of ModernBERT (modernGENA): the converted model gives transformers' own
``ModernBertForMaskedLM`` / ``ModernBertForSequenceClassification`` outputs.

Sources: modernGENA's config scaled down (helpers/modernbert.py: 4 layers, global attention in
layers 0 and 3, an 8-token local window elsewhere, GeGLU, no biases, LayerNorms without bias,
silu head), random weights, saved with ``save_pretrained``, GENA-LM's 32,000-token tokenizer
under 32,768 embedding rows. Inputs of 7 to 40 tokens, so that the window matters, padded and
batched; every layer's hidden states and the logits must agree to 1e-4 (fp32) at real tokens.
"""

from __future__ import annotations

import json

import pytest
import torch
from helpers.convert import assert_same_outputs, genolong_hidden_states, token_batch
from helpers.modernbert import GENA_TOKENS, moderngena_source
from transformers.utils import logging as transformers_logging

import genolong.model  # noqa: F401  (registers the genolong Auto classes)
from genolong.cli.main import main
from genolong.convert import ConversionError, LongSpec, convert_checkpoint
from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification

LENGTHS = [40, 23, 7]  # one row longer than the window on both sides, one shorter than it
TOLERANCE = 1e-4


@torch.no_grad()
def source_outputs(model, ids, mask):
    """Logits over the tokenizer's tokens and the hidden states (embeddings, every layer)."""
    output = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    return output.logits[..., :GENA_TOKENS], list(output.hidden_states)


def converted(source_dir, out, model_class=GenolongForMaskedLM):
    convert_checkpoint(source_dir, out)
    return model_class.from_pretrained(str(out)).eval()


@pytest.fixture(scope="module", params=["same bases", "ModernBERT-base bases"])
def masked_lm(request, real_data, tmp_path_factory):
    """(transformers ModernBertForMaskedLM, converted GenolongForMaskedLM): modernGENA's equal
    rotary bases (eager attention), then ModernBERT-base's global 160,000 / local 10,000 (sdpa)."""
    work = tmp_path_factory.mktemp("modernbert")
    if request.param == "same bases":
        source = moderngena_source(work / "src", real_data, attention="eager")
    else:
        source = moderngena_source(work / "src", real_data, global_rope_theta=160000.0)
    return source, converted(work / "src", work / "out"), work


def mlm_difference(source, model, lengths=LENGTHS, seed=0) -> float:
    ids, mask = token_batch(lengths, GENA_TOKENS, seed)
    return assert_same_outputs(genolong_hidden_states(model, ids, mask), source_outputs(source, ids, mask), mask,
                               TOLERANCE)


def test_masked_lm_logits_and_every_layer_agree_on_padded_batches(masked_lm):
    source, model, _ = masked_lm
    assert model.config.backbone == "longformer" and model.config.full_attention_layers == [0, 3]
    assert model.config.attention_window == 8 and model.config.num_global_tokens == 0
    mlm_difference(source, model)
    mlm_difference(source, model, [31], seed=1)
    mlm_difference(source, model, [1024], seed=2)  # modernGENA's whole length


def test_the_local_and_global_rotary_bases_are_read_per_layer_type(masked_lm):
    source, model, _ = masked_lm
    bases = {kind: source.config.rope_parameters[kind]["rope_theta"] for kind in ("full_attention", "sliding_attention")}
    assert model.config.rotary_base == bases["full_attention"]
    assert model.config.local_rotary_base == bases["sliding_attention"]
    assert [block.rotary.base for block in model.genolong.encoder.blocks] == [
        bases[kind] for kind in source.config.layer_types]


def test_the_padded_vocabulary_is_cut_to_the_tokenizer(masked_lm):
    """32,768 rows for 32,000 tokens: the rows no token reaches are dropped, every token's logit is kept."""
    source, model, _ = masked_lm
    assert source.config.vocab_size == 32768 and model.config.vocab_size == GENA_TOKENS
    assert model.config.tie_word_embeddings
    torch.testing.assert_close(model.lm_head.decoder.bias, source.decoder.bias[:GENA_TOKENS])
    assert (model.config.pad_token_id, model.config.cls_token_id, model.config.mask_token_id) == (3, 1, 4)


def test_a_legacy_config_reads_as_transformers_4_wrote_it(masked_lm, tmp_path):
    """modernGENA's hub config was written by transformers 4: ``global_attn_every_n_layers``,
    ``global_rope_theta`` / ``local_rope_theta`` (null: the global base), no ``layer_types``."""
    source, model, work = masked_lm
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    for path in (work / "src").iterdir():
        (legacy / path.name).write_bytes(path.read_bytes())
    config = json.loads((legacy / "config.json").read_text())
    bases = config.pop("rope_parameters")
    del config["layer_types"]
    local = bases["sliding_attention"]["rope_theta"]
    global_ = bases["full_attention"]["rope_theta"]
    config |= {"global_rope_theta": global_, "local_rope_theta": None if local == global_ else local}
    (legacy / "config.json").write_text(json.dumps(config))
    again = converted(legacy, tmp_path / "out")
    assert again.config.to_diff_dict() | {"converted_from": None} == model.config.to_diff_dict() | {"converted_from": None}
    mlm_difference(source, again)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_sequence_classifier_logits_agree(pooling, real_data, tmp_path):
    source = moderngena_source(tmp_path / "src", real_data, classifier=True, num_labels=3,
                               classifier_pooling=pooling, problem_type="multi_label_classification")
    model = converted(tmp_path / "src", tmp_path / "out", GenolongForSequenceClassification)
    assert model.config.classifier_pooling == pooling and model.config.classifier_pooler == "silu"
    assert model.config.classifier_norm and not model.config.head_dense_bias
    ids, mask = token_batch(LENGTHS, GENA_TOKENS, seed=3)
    with torch.no_grad():
        theirs = source(input_ids=ids, attention_mask=mask).logits
        ours = model(input_ids=ids, attention_mask=mask).logits
    assert (ours - theirs).abs().max().item() <= TOLERANCE


def planted(model, mistake: str):
    """``model`` with one conversion mistake."""
    config = model.config.to_dict()
    if mistake == "rotary base":
        config["rotary_base"] = 20000.0
    elif mistake == "local rotary base":
        config["local_rotary_base"] = config["rotary_base"] * 2
    elif mistake == "window off by one":
        config["attention_window"] += 2  # one more token on each side: 5, a length unit that
        config["max_position_embeddings"] = 960  # divides 960, not 1024 (rotary: no table to resize)
    wrong = GenolongForMaskedLM(type(model.config).from_dict(config)).eval()
    state = model.state_dict()
    if mistake == "swapped gate":
        for name in [key for key in state if key.endswith("feed_forward.up.weight")]:
            gate, value = state[name].chunk(2)
            state[name] = torch.cat([value, gate])
    wrong.load_state_dict(state)
    return wrong


@pytest.mark.parametrize("mistake", ["rotary base", "local rotary base", "window off by one", "swapped gate"])
def test_a_planted_mistake_fails_the_comparison(masked_lm, mistake):
    source, model, _ = masked_lm
    with pytest.raises(AssertionError, match="differ by"):
        mlm_difference(source, planted(model, mistake))


@pytest.mark.parametrize("overrides, message", [
    ({"local_attention": 1}, "local_attention 1 lets a token see no neighbour"),
    ({"rope_parameters": {"full_attention": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
     "rope_type 'linear' (full_attention) is not supported"),
])
def test_what_the_encoder_cannot_compute_is_refused_in_one_line(overrides, message, real_data, tmp_path):
    moderngena_source(tmp_path / "src", real_data, **overrides)
    with pytest.raises(ConversionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_made_long_only_when_the_local_and_global_layers_share_a_rotary_base(masked_lm, tmp_path):
    """lsg gives every layer one attention, so every layer one rotary base: modernGENA's equal
    bases convert; ModernBERT-base's 160,000 / 10,000 would change the local layers, refused."""
    _, model, work = masked_lm
    spec = LongSpec("lsg", max_length=2048)
    if model.config.local_rotary_base == model.config.rotary_base:
        long = convert_checkpoint(work / "out", tmp_path / "long", long=spec)
        assert long.config.backbone == "lsg" and long.config.local_rotary_base is None
        assert {block.rotary.base for block in long.genolong.encoder.blocks} == {model.config.rotary_base}
    else:
        with pytest.raises(ConversionError, match="local-window layers rotate with base 10000, its global layers "
                                                  "with 160000"):
            convert_checkpoint(work / "out", tmp_path / "long", long=spec)


def test_the_command_names_the_dropped_rows_and_no_special_id_of_the_config(real_data, tmp_path, caplog):
    """modernGENA's config carries bos/eos ids outside its vocabulary; genolong reads the ids from
    the tokenizer, so transformers has nothing to warn about."""
    moderngena_source(tmp_path / "src", real_data)
    transformers_logging.warning_once.cache_clear()  # building the source warned once already
    transformers_logging.enable_propagation()
    try:
        with caplog.at_level("INFO"):
            assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    finally:
        transformers_logging.disable_propagation()
    assert "embedding rows 32000..32767 have no token in the tokenizer (vocabulary padding): dropped" in caplog.text
    assert "token_id must be" not in caplog.text
