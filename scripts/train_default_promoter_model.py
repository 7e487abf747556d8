"""Train the default promoter model that ships in ``genolong/resources/models/promoter/``.

Data (``../shared/data/promoters``, see its README): Umarov & Solovyev's mouse TATA promoters
(``Mouse_tata.fa``, EPDnew, -200..+50 around the TSS, 251 bp) against their real mouse
non-promoters (``Mouse_nonprom.fa``), split 80/10/10 at random, stratified by label (seed 42).
Model: the ``promoter_tiny`` preset trained from scratch (one token per base, 2 pre-LN layers).

It runs the same steps as these commands, then (with ``--install``) copies the model into the
package with a README that records the data, the commands, the commit and the test metrics
next to the k-mer baseline's::

    genolong promoter prepare --fasta Mouse_tata.fa --negatives fasta \\
        --negative-fasta Mouse_nonprom.fa --out WORK/data
    genolong finetune promoter --data WORK/data --out WORK/run --config promoter_tiny

``--dataset substitution`` trains the same recipe on ``mm_pos_TATA.txt`` with DeePromoter
substitution negatives instead (BigBird App. F.2's setting), for comparison; it is never installed.

Usage::

    python scripts/train_default_promoter_model.py --work runs/default_promoter --install

A rerun skips the dataset when it exists and resumes an interrupted training run.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASETS = {
    "real": {"fasta": "Mouse_tata.fa", "negatives": "fasta", "negative_fasta": "Mouse_nonprom.fa"},
    "substitution": {"text": "mm_pos_TATA.txt", "negatives": "substitution"},
}
PRESET = "promoter_tiny"
COMMIT_FILE = "genolong_commit.txt"
SEED = 42


def build_dataset(promoters: Path, name: str, out: Path) -> dict:
    from genolong.data_prep.promoter_dataset import (
        PromoterDatasetConfig,
        build_promoter_dataset,
        load_manifest,
    )

    if (out / "manifest.json").is_file():
        print(f"dataset: {out} exists, reused")
        return load_manifest(out)
    spec = {
        key: promoters / value if key in ("fasta", "negative_fasta", "text") else value
        for key, value in DATASETS[name].items()
    }
    return build_promoter_dataset(PromoterDatasetConfig(**spec, seed=SEED), out)


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def readme(report: dict, manifest: dict, commit: str, seconds: float) -> str:
    from genolong.metrics import PROMOTER_METRICS, format_metrics_table

    rows = {"this model (test)": report["test"], "k-mer baseline (test)": report["kmer_baseline"]["test"]}
    sources = "\n".join(
        f"- `{Path(s['path']).name}` ({s['role']}), sha256 `{s['sha256']}`" for s in manifest["sources"]
    )
    counts = ", ".join(
        f"{split} {c['1']} promoters / {c['0']} non-promoters" for split, c in manifest["counts"].items()
    )
    return f"""# Default promoter model

`genolong predict-promoter` uses this model when no `--model` is given. It was produced by

    python scripts/train_default_promoter_model.py --work WORK --install

with the code of commit `{commit}` (torch {report["torch"]}, {platform.machine()}; training took
{seconds / 60:.0f} min on 2 CPU cores shared with other jobs).

**Task**: mouse TATA promoters (EPDnew, -200..+50 around the TSS, 251 bp) against real mouse
non-promoter sequences, the sets of Umarov & Solovyev (2016), MIT licence (via
nmach22/Promoter-Classification; `../shared/data/promoters/README`). Longer records are
scanned in 251-bp windows; shorter ones are not scored.

**Data**: `genolong promoter prepare --fasta Mouse_tata.fa --negatives fasta --negative-fasta
Mouse_nonprom.fa` (stratified random split 80/10/10, seed {manifest["seed"]}): {counts}.

{sources}

**Model**: preset `{PRESET}` from scratch: {report["parameters"]:,} parameters, backbone
`{report["backbone"]}`, one token per base; best validation F1 at step {report["best_step"]} of
{report["steps"]}; decision threshold {report["threshold"]:.4f} (max F1 on validation).

**Test set** ({report["test"]["n"]} sequences, {report["test"]["n_positive"]} promoters), with the
k-mer (k = 4..6) logistic-regression baseline fitted on the same splits:

```
{format_metrics_table(rows)}
```

Metrics: {", ".join(PROMOTER_METRICS)} (scikit-learn), both at thresholds chosen on validation.
`genolong_task.json` holds the full report and configuration.
"""


def install(run: Path, report: dict, manifest: dict, commit: str, seconds: float) -> Path:
    from genolong.classifier import default_promoter_model
    from genolong.files import atomic_path

    target = default_promoter_model()
    with atomic_path(target, directory=True) as tmp:
        for path in (run / "model").iterdir():
            shutil.copy2(path, tmp / path.name)
        task = json.loads((tmp / "genolong_task.json").read_text())
        task["provenance"].pop("genolong_run", None)  # a path on the training machine
        (tmp / "genolong_task.json").write_text(json.dumps(task, indent=2) + "\n")
        (tmp / "README.md").write_text(readme(report, manifest, commit, seconds))
        for path in tmp.iterdir():  # package data: readable by all (temporary files are private)
            path.chmod(0o644)
        tmp.chmod(0o755)
    size = sum(p.stat().st_size for p in target.iterdir())
    print(f"installed {target} ({size / 1e6:.1f} MB)")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--promoters",
        type=Path,
        default=REPO.parent / "shared" / "data" / "promoters",
        help="directory with Mouse_tata.fa, Mouse_nonprom.fa, mm_pos_TATA.txt",
    )
    parser.add_argument("--work", type=Path, required=True, help="working directory (dataset and run)")
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="real")
    parser.add_argument("--max-steps", type=int, default=None, help="override the preset's max_steps")
    parser.add_argument("--install", action="store_true", help="copy the model into the package")
    args = parser.parse_args(argv)
    if args.install and args.dataset != "real":
        parser.error("only the model trained on real negatives (--dataset real) is installed")

    import torch

    from genolong.commands.finetune import summary
    from genolong.tasks.classify import load_classify_config, run_finetune

    started = time.perf_counter()
    data, run = args.work / f"data_{args.dataset}", args.work / f"run_{args.dataset}"
    manifest = build_dataset(args.promoters, args.dataset, data)
    overrides = {} if args.max_steps is None else {"train.max_steps": args.max_steps}
    if (run / "report.json").is_file():
        print(f"training: {run} is complete, reused")
        report = json.loads((run / "report.json").read_text())
    else:
        run.mkdir(parents=True, exist_ok=True)
        if not (run / COMMIT_FILE).is_file():  # the code this run trains with (a resumed run keeps it)
            (run / COMMIT_FILE).write_text(git_commit() + "\n")
        report = run_finetune(
            data,
            run,
            load_classify_config("promoter", PRESET, overrides),
            resume=(run / "checkpoints" / "last.ckpt").exists(),
        )
        if "stopped_at_step" in report:
            print(f"stopped at step {report['stopped_at_step']}; rerun to resume")
            return 1
    report["torch"] = torch.__version__
    print(summary(report))
    if args.install:
        commit = (run / COMMIT_FILE).read_text().strip() if (run / COMMIT_FILE).is_file() else "unknown"
        install(run, report, manifest, commit, report.get("seconds", time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
