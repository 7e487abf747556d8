"""``genolong convert SRC --out DIR``: a published transformers checkpoint -> a genolong model."""

from __future__ import annotations

from pathlib import Path

from genolong.outputs import OutputDirectory, declare


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert a transformers checkpoint (BigBird, BERT, GENA-LM, ESM) into a genolong model",
        description="Convert a local transformers checkpoint directory (config.json, weights, tokenizer files; "
        "e.g. a hub snapshot) into a genolong model directory with the source's tokenizer. "
        "Supported: big_bird, bert (post-LN and GENA-LM pre-LN), esm with absolute positions; masked-LM "
        "checkpoints, and sequence classifiers with multi-label or 2-class softmax outputs (converted to "
        "sigmoids). A classifier converted with --task and --window-bp is ready for that task's predict "
        "commands; without them it is a model for AutoModelForSequenceClassification and for fine-tuning (--model).",
    )
    parser.add_argument("src", type=Path, help="directory of the transformers checkpoint")
    parser.add_argument("--out", required=True, type=Path, help="genolong model directory to write")
    parser.add_argument("--force", action="store_true", help="replace an existing output directory")
    parser.add_argument("--task", choices=("promoter", "chromatin"),
                        help="a sequence classifier's task: write genolong_task.json (needs --window-bp)")
    parser.add_argument("--window-bp", type=int, metavar="N",
                        help="with --task: the input length in bp the classifier scores (longer records: windows of N)")
    parser.set_defaults(func=run_convert)
    declare(parser, inputs=["src"], directories={"out": OutputDirectory("convert", atomic=True)})


def run_convert(args) -> int:
    from genolong.model.convert import convert_checkpoint, describe_conversion

    model = convert_checkpoint(args.src, args.out, force=args.force, task=args.task, window_bp=args.window_bp)
    print(describe_conversion(model, args.out, args.task))
    return 0
