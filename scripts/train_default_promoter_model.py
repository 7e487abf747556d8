"""Train the default promoter model that ships in ``genolong/resources/models/promoter/``.

Data (``../shared/data``, see its README for provenance and licences), split by SOURCE with
the shipped spec ``configs/promoter_sources/default.yaml``:

- train: mouse EPDnew TATA promoters in both windows (``Mouse_tata.fa``, -200..+50, 251 bp;
  ``mm_pos_TATA.txt``, -249..+50, 300 bp), real mouse non-promoters (``Mouse_nonprom.fa``)
  and random windows of *C. elegans* chromosome X as real genomic background; a random 10%
  of these sources is held out as ``random_test`` (the random-split numbers);
- valid (early stopping, Platt calibration, threshold): mouse DBTSS TATA promoters
  (``Mouse_tata_dbtss.fa``) against yeast chromosome I windows;
- test: *A. thaliana* EPDnew TATA and non-TATA promoters against real *A. thaliana*
  non-promoters;
- every split also gets substitution (DeePromoter) negatives made from its own promoters.
  No human sequence is read.

Model: the ``promoter_default`` preset (``promoter_bpe``'s 2-layer backbone with a 256-token BPE
tokenizer trained on the training split, from scratch; random crops of 240 bp up to the
window; positives weighted 2.5x). It runs the same
steps as these commands, then (with ``--install``) copies the model into the package with a
README that records the data, the commands, the commit and the metrics next to the k-mer
baseline's::

    genolong promoter prepare-sources --spec default --root ../shared/data --out WORK/data
    genolong finetune promoter --data WORK/data --out WORK/run --config promoter_default

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
SPEC = "default"
PRESET = "promoter_default"
COMMIT_FILE = "genolong_commit.txt"
TRAINED_ON = (
    "mouse TATA promoters (EPDnew -200..+50 and -249..+50) vs real mouse non-promoters, C. elegans "
    "chrX background and substitution negatives; calibrated on mouse DBTSS promoters vs "
    "yeast chrI (no human data)"
)


def build_dataset(data_root: Path, out: Path) -> dict:
    """The held-out-source dataset of the default model (reused when ``out`` exists)."""
    from genolong.data_prep.source_split import build_source_split_dataset, load_source_split_config
    from genolong.datasets.promoter import load_manifest

    if (out / "manifest.json").is_file():
        print(f"dataset: {out} exists, reused")
        return load_manifest(out)
    return build_source_split_dataset(load_source_split_config(SPEC, data_root), out)


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def readme(report: dict, manifest: dict, commit: str, seconds: float) -> str:
    from genolong.evaluation.cross_source import format_pair_table
    from genolong.evaluation.metrics import PROMOTER_METRICS, format_metrics_table

    kmer = report["kmer_baseline"]
    rows = {
        "this model, held-out sources (test)": report["test"],
        "k-mer baseline, held-out sources (test)": kmer["test"],
        "this model, random split (random_test)": report["by_source"]["random_test"]["all"],
        "k-mer baseline, random split (random_test)": kmer["by_source"]["random_test"]["all"],
    }
    files = "\n".join(
        f"- `{Path(s['path']).name}` ({s['group']}, {s['role']}), sha256 `{s['sha256']}`" for s in manifest["sources"]
    )
    counts = ", ".join(
        f"{split} {c['1']:,} promoters / {c['0']:,} non-promoters" for split, c in manifest["counts"].items()
    )
    calibration = report["calibration"]
    return f"""# Default promoter model

`genolong predict-promoter` uses this model when no `--model` is given. It was produced by

    python scripts/train_default_promoter_model.py --work WORK --install

with the code of commit `{commit}` (torch {report["torch"]}, {platform.machine()}, 2-core AMD EPYC CPU
shared with other jobs, no GPU; dataset and training took {seconds / 60:.0f} min), that is:

    genolong promoter prepare-sources --spec {SPEC} --root ../shared/data --out WORK/data
    genolong finetune promoter --data WORK/data --out WORK/run --config {PRESET}

**Trained on**: {TRAINED_ON}.

**Records**: any length from {report["min_bp"]} bp. Records up to {report["window_bp"]} bp are scored
whole; longer ones are scanned in {report["window_bp"]}-bp windows (stride 150 bp) and get their best
window's probability. The model was trained on random crops of 240 bp up to the whole 251- or
300-bp window, so the TSS need not sit at one offset.

**Threshold**: {report["threshold"]:.4f}, the F1-best threshold on the validation sources (after calibration).

**Probability**: Platt-scaled on the validation sources (scale {calibration["scale"]:.3f}, offset
{calibration["offset"]:.3f}, folded into the output layer; validation ECE {calibration["valid_ece_before"]:.3f}
before). The ECE columns below are measured on the test sources and the random split, which
calibration never saw.

**Data** (`configs/promoter_sources/{SPEC}.yaml`; sets of Umarov & Solovyev 2016 and
DeePromoter, MIT; genomes from Bioconductor, Artistic-2.0; see `../shared/data/README.md`).
Identical sequences are removed across all sources before splitting: {counts}.

{files}

**Model**: preset `{PRESET}` from scratch: {report["parameters"]:,} parameters, backbone
`{report["backbone"]}`, 256 BPE tokens trained on the training split; best validation F1 at step {report["best_step"]} of
{report["steps"]}.

**Results**, next to the k-mer (k = 4..6) logistic-regression baseline fitted on the same
training data (its C and threshold chosen on the same validation sources):

```
{format_metrics_table(rows)}
```

Per pair of sources (test: *A. thaliana*, never seen in training or selection; random_test: a
random 10% of the training sources; derived negatives are paired with the promoters they were
made from). Note that `Mouse_tata` and `mm_pos_TATA` hold windows of the same promoters, so the
random split shares promoters (not sequences) between train and random_test:

{format_pair_table(report["by_source"], kmer["by_source"])}

Metrics: {", ".join(PROMOTER_METRICS)} (scikit-learn) at the thresholds chosen on validation; ECE:
10 equal-width bins. `genolong_task.json` holds the full report and configuration.
"""


def install(run: Path, report: dict, manifest: dict, commit: str, seconds: float) -> Path:
    from genolong.files import atomic_path
    from genolong.inference.classifier import default_promoter_model

    target = default_promoter_model()
    with atomic_path(target, directory=True) as tmp:
        for path in (run / "model").iterdir():
            shutil.copy2(path, tmp / path.name)
        task = json.loads((tmp / "genolong_task.json").read_text())
        task["provenance"].pop("genolong_run", None)  # a path on the training machine
        task["provenance"]["trained_on"] = TRAINED_ON
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
        "--data-root",
        type=Path,
        default=REPO.parent / "shared" / "data",
        help="directory with promoters/ and genomes/ (default: ../shared/data)",
    )
    parser.add_argument("--work", type=Path, required=True, help="working directory (dataset and run)")
    parser.add_argument("--max-steps", type=int, default=None, help="override the preset's max_steps")
    parser.add_argument("--install", action="store_true", help="copy the model into the package")
    args = parser.parse_args(argv)

    import torch

    from genolong.tasks.finetune import run_finetune
    from genolong.tasks.task import load_finetune_config, report_summary

    started = time.perf_counter()
    data, run = args.work / "data", args.work / "run"
    manifest = build_dataset(args.data_root, data)
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
            load_finetune_config("promoter", PRESET, overrides),
            resume=(run / "checkpoints" / "last.ckpt").exists(),
        )
        if "stopped_at_step" in report:
            print(f"stopped at step {report['stopped_at_step']}; rerun to resume")
            return 1
    report["torch"] = torch.__version__
    print(report_summary(report))
    if args.install:
        commit = (run / COMMIT_FILE).read_text().strip() if (run / COMMIT_FILE).is_file() else "unknown"
        install(run, report, manifest, commit, report.get("seconds", time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
