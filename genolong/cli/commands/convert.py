"""``genolong convert SRC --out DIR``: a published transformers checkpoint -> a genolong model."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.outputs import OutputDirectory, declare

#: ``--task``: the keys of :data:`genolong.convert.classification.TASKS` (named here without
#: importing torch).
TASK_CHOICES = ("promoter", "chromatin", "labelled")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert a transformers checkpoint (BigBird, BERT, GENA-LM, ESM) into a genolong model",
        description="Convert a transformers checkpoint directory (config.json, weights, tokenizer files; "
        "e.g. a hub snapshot), or a hub identifier ORG/NAME (downloaded, verified by the hub's hashes, no code "
        "fetched), into a genolong model directory with the source's tokenizer. "
        "Supported: big_bird, bert (post-LN and GENA-LM pre-LN), esm with absolute positions; masked-LM "
        "checkpoints, and sequence classifiers of every problem type (multi-label sigmoids, a softmax, "
        "regression; a 2-class softmax becomes one sigmoid). A classifier converted with --task and --window-bp is "
        "ready for that task's commands (labelled: `genolong task predict`, any problem type; promoter, chromatin: "
        "sigmoid outputs); without them it is a model for AutoModelForSequenceClassification and for fine-tuning (--model). "
        "With --backbone, the model (or a genolong model directory with full attention) is made long as LSG does: "
        "the attention swapped, the position embeddings copied up to --max-length, optional global tokens "
        "initialised from [CLS] and [MASK] (docs/guide/long-context.md).",
    )
    parser.add_argument("src", type=Path,
                        help="directory of the transformers checkpoint, or a hub identifier ORG/NAME (downloaded from "
                        "HF_ENDPOINT into the Hugging Face cache: config, weights and tokenizer, never code)")
    parser.add_argument("--revision", metavar="REV", help="with ORG/NAME: the hub branch, tag or commit (default: main)")
    parser.add_argument("--out", required=True, type=Path, help="genolong model directory to write")
    parser.add_argument("--force", action="store_true", help="replace an existing output directory")
    parser.add_argument("--task", choices=TASK_CHOICES,
                        help="a sequence classifier's task: write genolong_task.json (needs --window-bp); "
                        "labelled: your own task of any problem type (`genolong task predict`)")
    parser.add_argument("--window-bp", type=int, metavar="N",
                        help="with --task: the input length in bp the classifier scores (longer records: windows of N)")
    long = parser.add_argument_group("long context (LSG conversion)")
    long.add_argument("--backbone", metavar="NAME",
                      help="make the model long with this attention: lsg, bigbird, longformer, sled (chunks, no new "
                      "positions), full (positions only), or a registered backbone that declares its conversion")
    long.add_argument("--max-length", type=int, metavar="N",
                      help="positions of the long model (lsg, bigbird, longformer): the trained ones copied up to N")
    long.add_argument("--block-size", type=int, metavar="B",
                      help="lsg/bigbird block size (default 128/64, at most half the trained positions); "
                      "longformer: tokens seen on each side (default: the trained positions); sled: the chunk size")
    long.add_argument("--global-tokens", type=int, default=0, metavar="G",
                      help="lsg, longformer: G global tokens ([CLS] + position 0, then [MASK] + positions); "
                      "sled: prefix tokens (default 0: short inputs give the source model's outputs)")
    declare(parser, run_convert, inputs=["src"], directories={"out": OutputDirectory("convert", atomic=True)})


def run_convert(args) -> None:
    from genolong.convert import ConversionError, LongSpec, convert_checkpoint, describe_conversion
    from genolong.convert.hub import resolve_source

    long = None
    if args.backbone is not None:
        long = LongSpec(args.backbone, args.max_length, args.block_size, args.global_tokens)
    elif args.max_length is not None or args.block_size is not None or args.global_tokens:
        raise ConversionError("--max-length, --block-size and --global-tokens go with --backbone")
    src = resolve_source(args.src, args.revision)
    name = None if Path(src) == Path(args.src) else str(args.src)  # a hub identifier names the source
    model = convert_checkpoint(src, args.out, force=args.force, task=args.task, window_bp=args.window_bp,
                               long=long, name=name)
    print(describe_conversion(model, args.out, args.task))
