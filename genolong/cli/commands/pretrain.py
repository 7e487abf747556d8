"""``genolong pretrain``: tokenizer, corpus and MLM training in one command."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import add_config_arguments, config_overrides
from genolong.cli.outputs import OutputDirectory, declare

#: Steps of the embedded default run (no --genome) unless --max-steps says otherwise.
SAMPLE_STEPS = 100


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "pretrain", help="pretrain a model with MLM on a genome (tokenizer -> corpus -> training)",
        description="Runs the tokenizer (unless --tokenizer), the corpus and MLM training into --out, "
                    "skipping steps whose outputs exist and match. With no --genome: the shipped 56 kbp "
                    f"human sample, the tiny preset and {SAMPLE_STEPS} steps.")
    parser.add_argument("--genome", type=Path, default=None, help="FASTA (plain, gzip or bgzip)")
    parser.add_argument("--tokenizer", type=Path, default=None, help="use this tokenizer instead of training one")
    parser.add_argument("--config", default="tiny",
                        help="preset name (tiny, base, or one per backbone) or a YAML file (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("runs/pretrain"), help="run directory (default: %(default)s)")
    add_config_arguments(parser, ["--backbone", "--max-steps", "--batch-size", "--devices", "--num-nodes",
                                  "--strategy", "--accelerator", "--precision"])
    parser.add_argument("--resume", action="store_true", help="continue from out/checkpoints/last.ckpt")
    declare(parser, run, inputs=["genome", "tokenizer", "config"],
            directories={"out": OutputDirectory("pretrain")})


def run(args) -> None:
    from genolong.resources import sample_genome
    from genolong.training.pretrain import load_pretrain_config, run_pretrain

    sample = args.genome is None
    overrides = config_overrides(args)
    if sample:  # the shipped sample is ~100 windows: 100 steps of 8 are 8 passes over it, minutes on 2 cores
        overrides.setdefault("train.max_steps", SAMPLE_STEPS)
    config = load_pretrain_config(args.config, overrides)
    genome = args.genome
    if sample:
        genome = sample_genome()
        print(f"no --genome given: pretraining on the shipped sample {genome.name} (hg19 chr17 fragment + "
              f"chrM), preset {args.config!r}, {config.train.max_steps} steps")
    report = run_pretrain(genome, args.out, config, tokenizer_dir=args.tokenizer, resume=args.resume)
    if "stopped_at_step" in report:
        print(f"stopped at step {report['stopped_at_step']}; continue with --resume")
        return
    print(f"validation: loss {report['val_loss']:.4f} nats/token, {report['val_bpc']:.4f} bits/bp "
          f"(token unigram: {report['unigram_bpc']:.4f} bits/bp)")
    print(f"model: {args.out / 'model'}   report: {args.out / 'report.json'}   "
          f"curve: {args.out / 'learning_curve.png'}")
