"""``genolong convert SRC --out DIR``: a published transformers checkpoint -> a genolong model."""

from __future__ import annotations

from pathlib import Path

from genolong.outputs import OutputDirectory, declare


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert a transformers checkpoint (BigBird, BERT, GENA-LM, ESM) into a genolong model",
        description="Convert a local transformers checkpoint directory (config.json, weights, tokenizer files; "
        "e.g. a hub snapshot) into a genolong masked-LM model directory with the source's tokenizer. "
        "Supported: big_bird, bert (post-LN and GENA-LM pre-LN), esm with absolute positions.",
    )
    parser.add_argument("src", type=Path, help="directory of the transformers checkpoint")
    parser.add_argument("--out", required=True, type=Path, help="genolong model directory to write")
    parser.add_argument("--force", action="store_true", help="replace an existing output directory")
    parser.set_defaults(func=run_convert)
    declare(parser, inputs=["src"], directories={"out": OutputDirectory("convert", atomic=True)})


def run_convert(args) -> int:
    from genolong.model.convert import convert_checkpoint

    model = convert_checkpoint(args.src, args.out, force=args.force)
    config = model.config
    print(
        f"converted {config.converted_from['model_type']} ({config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, {config.max_position_embeddings} positions, backbone {config.backbone}) "
        f"-> {args.out}"
    )
    return 0
