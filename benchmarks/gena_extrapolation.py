"""The extrapolation experiment on a converted GENA-style BERT (docs/results/extrapolation.md).

GENA-LM (AIRI-Institute/GENA_LM) publishes pre-LN BERTs with 512 positions. Their weights are not
in ``../shared/data``: its ``checkpoints/gena_lm/`` holds their real configs and tokenizer. This
script checks the mechanics of the LSG conversion on that layout, end to end through the CLI:

1. a checkpoint in GENA-LM's own format: ``config.json`` from their ``--config`` (scaled down for
   a CPU by ``--layers/--hidden/--heads/--intermediate``; every other key as published, pre-LN),
   ``pytorch_model.bin`` under their parameter names (``bert.encoder.layer.N.pre_attention_ln``
   ...) with BERT's initialisation (their ``_init_weights``: N(0, initializer_range), zero biases,
   unit LayerNorms), and their tokenizer files unchanged;
2. ``genolong convert SRC --out SRC_full`` (the same model as a genolong directory) and
   ``genolong convert SRC --backbone lsg|bigbird|longformer|sled --max-length 4 x positions``;
3. a corpus of ``--genome`` with their tokenizer (``genolong corpus build``);
4. ``--pretrain-steps`` MLM steps at the trained length on the corpus' training split (the
   extrapolation experiment's own fine-tuning loop; 0 keeps the random initialisation);
5. ``genolong extrapolate`` on that model, which converts it again to each attention and
   measures masked-token BPC on the corpus' test split at L and 4 L, before and after
   ``--finetune-steps`` MLM steps at 4 L.

Usage::

    python benchmarks/gena_extrapolation.py --shared-data ../shared/data --out runs/gena_extrapolation

The table is ``OUT/extrapolation/extrapolation.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

GENA = Path("checkpoints") / "gena_lm"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def gena_config(shared: Path, name: str, args: argparse.Namespace) -> dict:
    """GENA-LM's published config ``name`` with the sizes of ``args`` (every other key kept)."""
    config = json.loads((shared / GENA / "configs" / name).read_text())
    if not config.get("pre_layer_norm"):
        raise SystemExit(f"{name}: not a pre-LN GENA-LM BERT config")
    return config | {"num_hidden_layers": args.layers, "hidden_size": args.hidden, "num_attention_heads": args.heads,
                     "intermediate_size": args.intermediate, "max_position_embeddings": args.positions}


def gena_state(config: dict, seed: int) -> dict[str, torch.Tensor]:
    """BertForMaskedLM of GENA-LM's ``modeling_bert.py`` at initialisation: parameter names and
    shapes of their pre-LN layers (``last_layer_ln`` when ``last_layer_norm``, which their code
    defaults to ``pre_layer_norm``); matrices and embeddings N(0, initializer_range), biases 0,
    LayerNorms 1 and 0. The decoder is tied to the word embeddings (saved as one tensor)."""
    n, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    matrices = {"bert.embeddings.word_embeddings.weight": (v, n),
                "bert.embeddings.position_embeddings.weight": (config["max_position_embeddings"], n),
                "bert.embeddings.token_type_embeddings.weight": (config["type_vocab_size"], n),
                "cls.predictions.transform.dense.weight": (n, n)}
    biases = {"cls.predictions.transform.dense.bias": n, "cls.predictions.bias": v}
    norms = ["bert.embeddings.LayerNorm", "cls.predictions.transform.LayerNorm"]
    for layer in range(config["num_hidden_layers"]):
        prefix = f"bert.encoder.layer.{layer}"
        for name, shape in (("attention.self.query", (n, n)), ("attention.self.key", (n, n)),
                            ("attention.self.value", (n, n)), ("attention.output.dense", (n, n)),
                            ("intermediate.dense", (i, n)), ("output.dense", (n, i))):
            matrices[f"{prefix}.{name}.weight"] = shape
            biases[f"{prefix}.{name}.bias"] = shape[0]
        norms += [f"{prefix}.pre_attention_ln", f"{prefix}.post_attention_ln"]
    if config.get("last_layer_norm", config["pre_layer_norm"]):
        norms.append("bert.encoder.last_layer_ln")
    generator = torch.Generator().manual_seed(seed)
    std = config["initializer_range"]
    state = {name: torch.randn(shape, generator=generator) * std for name, shape in matrices.items()}
    state["bert.embeddings.word_embeddings.weight"][config["pad_token_id"]] = 0.0  # nn.Embedding's padding_idx
    state |= {name: torch.zeros(size) for name, size in biases.items()}
    for norm in norms:
        state |= {f"{norm}.weight": torch.ones(n), f"{norm}.bias": torch.zeros(n)}
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    return state


def write_source(shared: Path, out: Path, args: argparse.Namespace) -> dict:
    """The GENA-style checkpoint directory ``out`` (config.json, pytorch_model.bin, tokenizer)."""
    config = gena_config(shared, args.config, args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    torch.save(gena_state(config, args.seed), out / "pytorch_model.bin")
    for name in TOKENIZER_FILES:
        shutil.copy(shared / GENA / "tokenizer_t2t_1000h_multi_32k" / name, out / name)
    return config


def pretrain_briefly(model_dir: Path, corpus_dir: Path, steps: int, args: argparse.Namespace) -> None:
    """``steps`` MLM steps at the model's length on the corpus' training split, saved in place."""
    from genolong.datasets.corpus import Corpus
    from genolong.experiments.extrapolate import ExtrapolationConfig, MaskedLMScorer
    from genolong.model.loading import load_model_tokenizer, read_model_config, save_model
    from genolong.model.modeling import GenolongForMaskedLM

    config = read_model_config(model_dir)
    tokenizer = load_model_tokenizer(model_dir, config)
    model = GenolongForMaskedLM.from_pretrained(str(model_dir))
    settings = ExtrapolationConfig(finetune_steps=steps, batch_size=args.batch_size,
                                   learning_rate=args.pretrain_learning_rate, seed=args.seed)
    MaskedLMScorer(Corpus(corpus_dir), tokenizer, settings, torch.device("cpu")).finetune(
        model, config.max_position_embeddings)
    save_model(model, tokenizer, model_dir)


def main(argv: list[str] | None = None) -> int:
    from genolong.cli.main import main as genolong

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("runs/gena_extrapolation"))
    parser.add_argument("--config", default="L12-H768-A12-V32k-preln-lastln.json", help="GENA-LM config to scale")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate", type=int, default=512)
    parser.add_argument("--positions", type=int, default=512, help="trained length L (GENA-LM: 512)")
    parser.add_argument("--genome", type=Path, default=None, help="default: SHARED/genomes/ce2chrX.fa.gz")
    parser.add_argument("--pretrain-steps", type=int, default=50)
    parser.add_argument("--pretrain-learning-rate", type=float, default=1e-3)
    parser.add_argument("--finetune-steps", type=int, default=10)
    parser.add_argument("--eval-tokens", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    shared, out = args.shared_data, args.out
    long_length = 4 * args.positions

    write_source(shared, out / "gena_src", args)
    steps = [["convert", str(out / "gena_src"), "--out", str(out / "gena_full")]]
    for backbone in ("lsg", "bigbird", "longformer", "sled"):
        length = [] if backbone == "sled" else ["--max-length", str(long_length)]
        steps.append(["convert", str(out / "gena_src"), "--out", str(out / f"gena_{backbone}"), "--backbone",
                      backbone, *length])
    steps.append(["corpus", "build", "--genome", str(args.genome or shared / "genomes" / "ce2chrX.fa.gz"),
                  "--tokenizer", str(out / "gena_full"), "--out", str(out / "corpus"), "--passes", "1",
                  "--valid-tail-fraction", "0.05", "--test-tail-fraction", "0.05"])
    for step in steps:
        print("genolong " + " ".join(step), flush=True)
        if genolong(step) != 0:
            return 1
    if args.pretrain_steps:
        pretrain_briefly(out / "gena_full", out / "corpus", args.pretrain_steps, args)
    extrapolate = ["extrapolate", "--model", str(out / "gena_full"), "--corpus", str(out / "corpus"), "--out",
                   str(out / "extrapolation"), "--multiples", "4", "--eval-tokens", str(args.eval_tokens),
                   "--finetune-steps", str(args.finetune_steps), "--batch-size", "1", "--device", "cpu",
                   "--seed", str(args.seed)]
    print("genolong " + " ".join(extrapolate), flush=True)
    return genolong(extrapolate)


if __name__ == "__main__":
    sys.exit(main())
