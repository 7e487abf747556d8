"""``genolong extrapolate``: LSG's extrapolation experiment (§4.1, Table 1) on DNA."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import add_model_argument, from_arguments, non_negative_int
from genolong.cli.outputs import OutputDirectory, declare


def _integers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "extrapolate", help="masked-LM BPC of a short model made long (full, lsg, bigbird, longformer, sled)",
        description="Convert a full-attention masked-LM model pretrained at L tokens (genolong convert --backbone) "
        "to each attention and measure its masked-token bits per bp on the corpus' held-out test split at L and "
        "at every multiple of L, without training and (--finetune-steps) after a short MLM fine-tune at the "
        "longest length, next to the model at L and the token-unigram baseline. Writes OUT/extrapolation.json, "
        ".tsv, .md (the table) and .png (the plot).")
    add_model_argument(parser, "genolong masked-LM model (full attention)")
    parser.add_argument("--corpus", type=Path, required=True,
                        help="corpus built with the model's tokenizer (a pretrain run's OUT/corpus, or `genolong "
                        "corpus build`): its test split is read, its train split fine-tunes")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--backbones", default="full,lsg,bigbird,longformer,sled",
                        help="comma-separated (default: %(default)s; full = full attention with copied positions)")
    parser.add_argument("--multiples", type=_integers, default=(4, 8), help="long lengths in multiples of L "
                        "(default: 4,8)")
    parser.add_argument("--eval-tokens", type=int, default=65536, help="held-out tokens read per length "
                        "(default: %(default)s)")
    parser.add_argument("--finetune-steps", type=non_negative_int, default=0,
                        help="MLM fine-tuning steps at the longest length after the first measurement (default 0)")
    parser.add_argument("--batch-size", type=int, default=1, help="windows per step (default: %(default)s)")
    parser.add_argument("--learning-rate", type=float, default=5e-4, help="fine-tuning peak rate (default: %(default)s)")
    parser.add_argument("--block-size", type=int, default=None, help="the conversions' --block-size (default: theirs)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda (default: %(default)s)")
    declare(parser, run_extrapolate, inputs=["model", "corpus"],
            directories={"out": OutputDirectory("extrapolate")})


def run_extrapolate(args) -> None:
    from genolong.core.files import claim_directory
    from genolong.experiments.extrapolate import ExtrapolationConfig, run_extrapolation, write_report
    from genolong.runtime.devices import resolve_device

    backbones = tuple(b for b in args.backbones.split(",") if b)
    config = from_arguments(ExtrapolationConfig, args, backbones=backbones)
    device = resolve_device(args.device)
    claim_directory(args.out, "extrapolate")
    report = run_extrapolation(args.model, args.corpus, config, device)
    paths = write_report(report, args.out)
    print((args.out / "extrapolation.md").read_text(), end="")
    print(f"-> {', '.join(str(p) for p in paths)}")
