"""``genolong convert``: each supported architecture gives its source model's outputs.

Sources are GENA-LM's real configs scaled down (2 layers, hidden 32) with random weights,
saved as published checkpoints are, with GENA-LM's real tokenizer; the reference is
transformers' own model (BigBird, BERT, ESM) or, for GENA-LM's pre-LN BERT, which transformers
cannot run, the small implementation of their modeling file below. Every layer's hidden states
and the masked-LM logits must agree to 1e-4 (fp32) at real tokens.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.convert import (
    assert_same_outputs,
    copy_gena_tokenizer,
    gena_config,
    genolong_hidden_states,
    randomize,
    save_source,
    token_batch,
)
from transformers import BertConfig, BertForMaskedLM, BigBirdConfig, BigBirdForPreTraining

import genolong.model  # noqa: F401  (registers the genolong Auto classes)
from genolong.convert import convert_checkpoint
from genolong.model.modeling import GenolongForMaskedLM

VOCAB = 32000


@torch.no_grad()
def transformers_outputs(model, input_ids, attention_mask):
    """Logits and hidden states (embeddings, then every layer) of a transformers masked-LM model."""
    output = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    logits = output.prediction_logits if hasattr(output, "prediction_logits") else output.logits
    return logits, list(output.hidden_states)


# -- BigBird (GENA-LM gena-lm-bigbird-base-t2t) -----------------------------------------------
@pytest.fixture(scope="module")
def big_bird(real_data, tmp_path_factory):
    """(transformers BigBirdForPreTraining, converted GenolongForMaskedLM)."""
    config = BigBirdConfig(**gena_config(real_data, "hf_bigbird_L12-H768-A12-V32k-L4096.json"))
    source = randomize(BigBirdForPreTraining(config))
    work = tmp_path_factory.mktemp("big_bird")
    save_source(work / "src", config.to_dict(), source.state_dict(), safetensors=False)
    copy_gena_tokenizer(real_data, work / "src")
    convert_checkpoint(work / "src", work / "out")
    return source, GenolongForMaskedLM.from_pretrained(str(work / "out")).eval()


def run_big_bird(big_bird, lengths, seed=0):
    source, converted = big_bird
    source.bert.set_attention_type("block_sparse")  # transformers keeps its full-attention fallback once taken
    ids, mask = token_batch(lengths, VOCAB, seed)
    theirs = transformers_outputs(source, ids, mask)
    return assert_same_outputs(genolong_hidden_states(converted, ids, mask), theirs, mask)


def test_big_bird_short_input_full_attention_fallback(big_bird):
    assert big_bird[1].config.full_attention_max_tokens == 704  # (5 + 2 * 3) * 64
    assert big_bird[1].config.attention_probs_dropout_prob == 0.0  # transformers' block-sparse has none
    run_big_bird(big_bird, [700])


@pytest.mark.slow
def test_big_bird_4096_tokens_block_sparse_eval_layout(big_bird):
    assert big_bird[1].config.random_layout == "transformers_eval"
    run_big_bird(big_bird, [4096], seed=1)


@pytest.mark.parametrize("lengths", [[1200, 900, 770], [300, 120]], ids=["sparse", "full"])
def test_big_bird_padded_batches(big_bird, lengths):
    run_big_bird(big_bird, lengths, seed=2)


def test_big_bird_special_ids_come_from_the_tokenizer(big_bird):
    config = big_bird[1].config
    assert (config.cls_token_id, config.sep_token_id, config.pad_token_id, config.mask_token_id) == (1, 2, 3, 4)


def test_seeded_layout_is_the_alternative(big_bird, tmp_path):
    """The seeded random layout runs on the converted weights and differs from transformers' eval layout."""
    _, converted = big_bird
    seeded = GenolongForMaskedLM(converted.config.__class__(**{**converted.config.to_dict(), "random_layout": "seeded"}))
    seeded.load_state_dict(converted.state_dict(), strict=False)
    ids, mask = token_batch([2048], VOCAB, seed=3)
    with torch.no_grad():
        a = converted(input_ids=ids, attention_mask=mask).logits
        b = seeded.eval()(input_ids=ids, attention_mask=mask).logits
    assert torch.isfinite(b).all() and (a - b).abs().max() > 1e-3


# -- BERT: transformers' post-LN, GENA-LM's pre-LN ---------------------------------------------
def test_post_ln_bert(real_data, tmp_path):
    fields = gena_config(real_data, "L12-H768-A12-V32k-preln.json")
    config = BertConfig(**{k: v for k, v in fields.items() if k not in ("pre_layer_norm", "last_layer_norm")})
    source = randomize(BertForMaskedLM(config))
    save_source(tmp_path / "src", config.to_dict(), source.state_dict(), safetensors=True)
    copy_gena_tokenizer(real_data, tmp_path / "src")
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert not converted.config.pre_layer_norm
    for lengths in ([512], [400, 257, 31]):
        ids, mask = token_batch(lengths, VOCAB, seed=len(lengths))
        assert_same_outputs(genolong_hidden_states(converted, ids, mask), transformers_outputs(source, ids, mask), mask)


def gena_pre_ln_state(config: dict, last_layer_norm: bool, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under GENA-LM's pre-LN BERT names (BertForMaskedLM of their modeling_bert.py)."""
    n, i, v, p = config["hidden_size"], config["intermediate_size"], config["vocab_size"], config["max_position_embeddings"]
    shapes = {
        "bert.embeddings.word_embeddings.weight": (v, n),
        "bert.embeddings.position_embeddings.weight": (p, n),
        "bert.embeddings.token_type_embeddings.weight": (2, n),
        "cls.predictions.transform.dense.weight": (n, n),
        "cls.predictions.transform.dense.bias": (n,),
        "cls.predictions.bias": (v,),
    }
    norms = ["bert.embeddings.LayerNorm", "cls.predictions.transform.LayerNorm"]
    for layer in range(config["num_hidden_layers"]):
        prefix = f"bert.encoder.layer.{layer}"
        for name, shape in (("attention.self.query", (n, n)), ("attention.self.key", (n, n)),
                            ("attention.self.value", (n, n)), ("attention.output.dense", (n, n)),
                            ("intermediate.dense", (i, n)), ("output.dense", (n, i))):
            shapes |= {f"{prefix}.{name}.weight": shape, f"{prefix}.{name}.bias": shape[:1]}
        norms += [f"{prefix}.pre_attention_ln", f"{prefix}.post_attention_ln"]
    if last_layer_norm:
        norms.append("bert.encoder.last_layer_ln")
    for norm in norms:
        shapes |= {f"{norm}.weight": (n,), f"{norm}.bias": (n,)}
    generator = torch.Generator().manual_seed(seed)
    state = {name: torch.randn(shape, generator=generator) * 0.1 for name, shape in shapes.items()}
    for norm in norms:
        state[f"{norm}.weight"] += 1.0
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    return state


def gena_pre_ln_reference(state, config, input_ids, attention_mask, last_layer_norm):
    """GENA-LM's pre-LN BertForMaskedLM: MLM logits and the hidden states of :func:`gena_pre_ln_states`."""
    states = gena_pre_ln_states(state, config, input_ids, attention_mask, last_layer_norm)

    def transform(name):
        return F.linear(states[-1], state[f"{name}.weight"], state[f"{name}.bias"])

    h = F.gelu(transform("cls.predictions.transform.dense"))
    h = F.layer_norm(h, h.shape[-1:], state["cls.predictions.transform.LayerNorm.weight"],
                     state["cls.predictions.transform.LayerNorm.bias"], config["layer_norm_eps"])
    return h @ state["cls.predictions.decoder.weight"].T + state["cls.predictions.bias"], states


def gena_pre_ln_states(state, config, input_ids, attention_mask, last_layer_norm):
    """GENA-LM's pre-LN BERT, written from their modeling_bert.py: per layer
    ``x = x + Attn(pre_attention_ln(x))``, ``x = x + FFN(post_attention_ln(x))``, then
    ``last_layer_ln`` if set; hidden states = embeddings and every layer (the last one normalised)."""
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]

    def w(name):
        return state[name]

    def linear(x, name):
        return F.linear(x, w(f"{name}.weight"), w(f"{name}.bias"))

    def norm(x, name):
        return F.layer_norm(x, x.shape[-1:], w(f"{name}.weight"), w(f"{name}.bias"), eps)

    batch, length = input_ids.shape
    x = w("bert.embeddings.word_embeddings.weight")[input_ids] + w("bert.embeddings.position_embeddings.weight")[:length]
    x = norm(x + w("bert.embeddings.token_type_embeddings.weight")[0], "bert.embeddings.LayerNorm")
    states = [x]
    bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
    for layer in range(config["num_hidden_layers"]):
        prefix = f"bert.encoder.layer.{layer}"
        h = norm(x, f"{prefix}.pre_attention_ln")
        q, k, v = (
            linear(h, f"{prefix}.attention.self.{name}").view(batch, length, heads, -1).transpose(1, 2)
            for name in ("query", "key", "value")
        )
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, -1)
        x = x + linear(context, f"{prefix}.attention.output.dense")
        h = F.gelu(linear(norm(x, f"{prefix}.post_attention_ln"), f"{prefix}.intermediate.dense"))
        x = x + linear(h, f"{prefix}.output.dense")
        states.append(x)
    if last_layer_norm:
        states[-1] = norm(x, "bert.encoder.last_layer_ln")
    return states


@pytest.mark.parametrize(
    "config_name, last_layer_norm",
    [("L12-H768-A12-V32k-preln.json", False), ("L12-H768-A12-V32k-preln-lastln.json", True)],
)
def test_gena_pre_ln_bert(real_data, tmp_path, config_name, last_layer_norm):
    """``last_layer_norm`` absent (the lastln config) means a final LayerNorm, as GENA-LM's code reads it."""
    config = gena_config(real_data, config_name)
    assert ("last_layer_norm" not in config) == last_layer_norm
    state = gena_pre_ln_state(config, last_layer_norm)
    save_source(tmp_path / "src", config, state, safetensors=False)
    copy_gena_tokenizer(real_data, tmp_path / "src")
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert converted.config.pre_layer_norm and converted.config.final_layer_norm == last_layer_norm
    for lengths in ([512], [300, 199]):
        ids, mask = token_batch(lengths, VOCAB, seed=len(lengths))
        with torch.no_grad():
            theirs = gena_pre_ln_reference(state, config, ids, mask, last_layer_norm)
        assert_same_outputs(genolong_hidden_states(converted, ids, mask), theirs, mask)


# -- ESM (Nucleotide Transformer v1: absolute positions) -----------------------------------------
def esm_source(out, classifier_labels=None):
    """A small EsmForMaskedLM in Nucleotide Transformer v1's layout, with its EsmTokenizer of 6-mers
    (``vocab.txt`` and ``tokenizer_config.json``, no ``tokenizer.json``); with ``classifier_labels`` (config fields) an EsmForSequenceClassification."""
    from itertools import product

    from transformers import EsmConfig, EsmForMaskedLM, EsmForSequenceClassification, EsmTokenizer

    out.mkdir()
    vocab = ["<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>", *("".join(k) for k in product("ACGT", repeat=6)),
             "A", "T", "C", "G", "N"]  # Nucleotide Transformer v1's vocab.txt
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
    EsmTokenizer(str(out / "vocab.txt")).save_pretrained(str(out))
    config = EsmConfig(
        vocab_size=len(vocab), pad_token_id=1, mask_token_id=2, max_position_embeddings=258,
        position_embedding_type="absolute", emb_layer_norm_before=False, token_dropout=False,
        tie_word_embeddings=False, **SMALL_ESM, **(classifier_labels or {}),
    )
    model_class = EsmForMaskedLM if classifier_labels is None else EsmForSequenceClassification
    source = randomize(model_class(config))
    save_source(out, config.to_dict() | {"architectures": [model_class.__name__]}, source.state_dict(), safetensors=True)
    return source, len(vocab)


SMALL_ESM = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64,
             "layer_norm_eps": 1e-12}


def test_esm_absolute_positions(tmp_path):
    source, vocab = esm_source(tmp_path / "src")
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert converted.config.max_position_embeddings == 256  # positions start after pad_token_id
    assert not converted.config.tie_word_embeddings
    for lengths in ([256], [200, 77, 5]):
        ids, mask = token_batch(lengths, vocab, seed=len(lengths), special=(3, 4, 1))
        assert_same_outputs(genolong_hidden_states(converted, ids, mask), transformers_outputs(source, ids, mask), mask)


def test_nucleotide_transformer_tokenizer_gets_a_tokenizer_json_with_the_same_ids(real_data, tmp_path):
    """The converted directory's fast tokenizer, as genolong's commands load it, encodes real genome
    sequence (human chr17, C. elegans chrX) and N runs to EsmTokenizer's ids, and genolong's
    encoder frames them as ESM does: <cls> tokens <eos>."""
    from transformers import EsmTokenizer

    from genolong.classifier.directory import TokenEncoder
    from genolong.dna.sequence import read_fasta
    from genolong.model.loading import load_model_tokenizer

    esm_source(tmp_path / "src")
    assert not (tmp_path / "src" / "tokenizer.json").exists()
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert (tmp_path / "out" / "tokenizer.json").is_file()
    fast = load_model_tokenizer(tmp_path / "out", converted.config)
    slow = EsmTokenizer(str(tmp_path / "src" / "vocab.txt"))
    assert (converted.config.cls_token_id, converted.config.sep_token_id) == (slow.cls_token_id, slow.eos_token_id)
    pieces = []
    for genome in ("chr17.hg19.part.fa", "ce2chrX.fa.gz"):
        sequence = next(read_fasta(real_data / "genomes" / genome)).sequence
        pieces += [sequence[start : start + 997] for start in range(0, len(sequence) - 997, len(sequence) // 20)]
    pieces += ["ACGTN" * 9, "ACGTACNNNNNNNNNNNNACGTAC", "ACGTACGTACG"]
    assert any("N" in piece for piece in pieces)
    expected = [slow(piece)["input_ids"] for piece in pieces]
    assert [fast(piece)["input_ids"] for piece in pieces] == expected
    framed = TokenEncoder(fast, max_len=400)(pieces[:4])
    for row, ids in zip(framed["input_ids"].tolist(), expected[:4], strict=True):
        assert row[: len(ids)] == ids


def test_genolong_feeds_gena_tokenizer_what_it_expects(real_data, tmp_path):
    """Lowercase (soft-masked) bases and IUPAC codes are cleaned to ACGTN before GENA-LM's tokenizer,
    whose vocabulary is uppercase; its own normalizer turns runs of >= 10 N into '-'."""
    from helpers.convert import copy_gena_tokenizer

    from genolong.classifier.directory import TokenEncoder
    from genolong.dna.tokenizer import load_tokenizer

    copy_gena_tokenizer(real_data, tmp_path)
    tokenizer = load_tokenizer(tmp_path)
    batch = TokenEncoder(tokenizer, 64)(["acgtTTGACArYGG" + "N" * 12 + "GATTACA"])
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[UNK]" not in tokens and "-" in tokens
    assert "".join(tokens[1:-1]) == "ACGTTTGACANNGG-GATTACA"
