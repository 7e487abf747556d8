"""Train the default promoter model that ships in ``genolong/resources/models/promoter/``.

Data (``../shared/data``, see its README for provenance and licences), split by SOURCE with
the shipped spec ``configs/promoter_sources/default.yaml``:

- train: mouse EPDnew TATA promoters in both windows (``Mouse_tata.fa``, -200..+50, 251 bp;
  ``mm_pos_TATA.txt``, -249..+50, 300 bp), real mouse non-promoters (``Mouse_nonprom.fa``)
  and random windows of *C. elegans* chromosome X as real genomic background; a random 10%
  of these sources is held out as ``random_test`` (the random-split numbers);
- valid (early stopping, stacking and calibration, threshold): mouse DBTSS TATA promoters
  (``Mouse_tata_dbtss.fa``, another database) against yeast chromosome I windows;
- test: *A. thaliana* EPDnew TATA and non-TATA promoters against real *A. thaliana*
  non-promoters (another kingdom);
- every split also gets two kinds of negatives made from its own promoters: substitution
  (DeePromoter: 12 of 20 pieces replaced by random bases) and shuffle (12 of 20 pieces
  permuted; the composition of the promoter, its motifs out of place), so that neither
  composition nor position alone separates the classes. No human sequence is read.

Model: the ``promoter_default`` preset (``promoter_tiny``'s per-base 2-layer backbone with a
residual 15-bp convolution over the token embeddings and a [CLS] read-out, from scratch;
random crops of 240 bp up to the window; positives weighted 3.5x), then the binary k-mer model
(a k-mer logistic regression) fitted on the same training split and stacked with the network on
the validation sources, as ``genolong task finetune`` stacks them (:mod:`genolong.evaluation.kmer_models`:
the k-mer model, the network or ``a * network + b * kmer + c``, whichever scores best out of fold).
The first two steps are those of these commands::

    genolong promoter prepare-sources --spec default --root ../shared/data --out WORK/data
    genolong promoter finetune --data WORK/data --out WORK/run --config promoter_default

With ``--install`` the ensemble goes into the package with a README that records the data,
the commands, the commit and the metrics next to the k-mer baseline's and the network's; then its
scan threshold is set on background genomes (yeast chrI, C. elegans chrX, the hg19 chr17 piece) and
checked on the held-out human chrM (:mod:`genolong.inference.scan.threshold`). ``--scan-threshold-only`` does only that
last step, for the model in the package (with ``--install``: written into it).
``--spec mouse_to_dbtss`` (mouse EPDnew -> mouse DBTSS, which is the default spec's validation
source) and ``--spec plant_to_mouse`` (A. thaliana -> mouse EPDnew) train the same recipe in
other directions, for the cross-source table of the README (``--other-work``); they cannot be
installed.

Usage::

    python scripts/train_default_promoter_model.py --work runs/default_promoter --install

A rerun skips the dataset when it exists, resumes an interrupted training run and reuses a
finished ensemble.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.classifier.records import best_window_probabilities, record_stride
from genolong.core.files import atomic_path
from genolong.datasets.promoter import load_manifest, load_split
from genolong.evaluation.cross_source import format_pair_table, pair_metrics
from genolong.evaluation.kmer_models import fit_kmer_model, fit_stack
from genolong.evaluation.metrics import (
    PROMOTER_METRICS,
    best_f1_threshold,
    format_metrics_table,
    promoter_metrics,
)
from genolong.inference.scan.threshold import (
    Background,
    PromoterSource,
    calibrate,
    card_section,
    install_scan_calibration,
)
from genolong.prep.genome_prepare import prepare_genome
from genolong.prep.source_split import SOURCE_SPLITS, build_source_split_dataset, load_source_split_config
from genolong.tasks.labelled import network_and_kmer_logits
from genolong.tasks.task import load_finetune_config
from genolong.training.finetune import run_finetune

REPO = Path(__file__).resolve().parents[1]
SPEC = "default"
PRESET = "promoter_default"
COMMIT_FILE = "genolong_commit.txt"
TRAINED_ON = (
    "mouse TATA promoters (EPDnew -200..+50 and -249..+50) vs real mouse non-promoters, C. elegans "
    "chrX background, substitution and shuffle negatives; network and k-mer model stacked "
    "on mouse DBTSS promoters vs yeast chrI (no human data)"
)
#: The species whose DNA the model was trained or validated on (scientific -> common name).
SPECIES = {"Mus musculus": "mouse", "Caenorhabditis elegans": "nematode", "Saccharomyces cerevisiae": "yeast"}
#: The genomes of the scan threshold: set on the background the model trained (C. elegans) and validated
#: (yeast) on and on the human chr17 piece (human DNA, which the model never saw, calls far more at the
#: threshold of the other two: ``ALTERNATIVES``), checked on the held-out human chrM. C. elegans chrX
#: (17.7 Mbp, about 2 hours on two shared cores) is scanned in 40 evenly spaced regions of 25 kb.
BACKGROUNDS = [
    Background("yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa", "S. cerevisiae", "chrI, whole", "calibration"),
    Background("ce2chrX.fa.gz", "C. elegans", "chrX, 40 evenly spaced 25-kb regions", "calibration", 40, 25_000),
    Background("chr17.hg19.part.fa", "H. sapiens", "hg19 chr17 piece, whole", "calibration"),
    Background("MT-human_NC_012920.1.fa", "H. sapiens", "chrM (rCRS), whole", "held out"),
]
#: The threshold the card also reports: set on the background of training and validation alone.
ALTERNATIVES = {
    "the yeast and C. elegans genomes (the background of training and validation)": [
        "yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa", "ce2chrX.fa.gz"],
}
#: Promoter files whose recall the card reports at the scan threshold (none takes part in setting it).
PROMOTER_RECALL = [
    PromoterSource("Mouse_tata.fa", "mouse EPDnew TATA", "train"),
    PromoterSource("Mouse_tata_dbtss.fa", "mouse DBTSS TATA", "valid (record threshold), held out"),
    PromoterSource("Arabidopsis_tata.fa", "A. thaliana EPDnew TATA", "held out (test)"),
    PromoterSource("Arabidopsis_non_tata.fa", "A. thaliana EPDnew non-TATA", "held out (test)"),
]


def build_dataset(data_root: Path, out: Path, spec: str = SPEC) -> dict:
    """The held-out-source dataset of the default model (reused when ``out`` exists)."""
    if (out / "manifest.json").is_file():
        print(f"dataset: {out} exists, reused")
        return load_manifest(out)
    return build_source_split_dataset(load_source_split_config(spec, data_root), out)


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def train_network(data: Path, run: Path, max_steps: int | None) -> dict | None:
    """Fine-tune the network (resumed when interrupted; reused when finished); None if it stopped early."""
    if (run / "report.json").is_file():
        print(f"training: {run} is complete, reused")
        return json.loads((run / "report.json").read_text())
    run.mkdir(parents=True, exist_ok=True)
    if not (run / COMMIT_FILE).is_file():  # the code this run trains with (a resumed run keeps it)
        (run / COMMIT_FILE).write_text(git_commit() + "\n")
    overrides = {} if max_steps is None else {"train.max_steps": max_steps}
    report = run_finetune(
        data,
        run,
        load_finetune_config("promoter", PRESET, overrides),
        resume=(run / "checkpoints" / "last.ckpt").exists(),
    )
    if "stopped_at_step" in report:
        print(f"stopped at step {report['stopped_at_step']}; rerun to resume")
        return None
    return report


def build_ensemble(data: Path, run: Path, network: dict) -> dict:
    """Add the k-mer component to the trained network, score every split, save ``run/ensemble``.

    Returns:
        The ensemble's report: the network's (backbone, steps, k-mer baseline...) with the
        ensemble's threshold and metrics, the network's own metrics under ``network`` and the
        stacking under ``calibration``.
    """
    target = run / "ensemble"
    if (target / "genolong_task.json").is_file():
        print(f"ensemble: {target} exists, reused")
        return Classifier.load(target, device="cpu").info.provenance["report"]
    started = time.perf_counter()
    splits = {name: load_split(data, name) for name in SOURCE_SPLITS}
    classifier = Classifier.load(run / "model", task="promoter", device="cpu")
    stacking = stack_kmer_model(classifier, splits["train"], splits["valid"])
    scores = score_splits(classifier, splits)
    report = network | scores
    report["network"] = {key: network[key] for key in ("threshold", "calibration", "valid", "test", "by_source")}
    report["calibration"] = stacking
    report["seconds"] = round(network.get("seconds", 0) + time.perf_counter() - started, 1)
    report["torch"] = torch.__version__
    report["ensemble_commit"] = git_commit()
    classifier.info.threshold = scores["threshold"]
    classifier.info.provenance["report"] = report
    classifier.save(target)
    return report


def stack_kmer_model(classifier: Classifier, train: list, valid: list, batch_size: int = 256) -> dict:
    """Fit the binary k-mer model on ``train``, stack it with the network on ``valid`` and save the
    stack in ``classifier`` (its k-mer component); returns the k-mer model's and the stack's report."""
    rows = {name: ([r.sequence for r in records], np.array([[r.label] for r in records], dtype=np.float64))
            for name, records in (("train", train), ("valid", valid))}
    kmer_model, report = fit_kmer_model("binary", rows["train"], rows["valid"])
    reader = kmer_model.component().bind(classifier.tokenizer)
    network, kmer = network_and_kmer_logits(classifier, rows["valid"][0], batch_size, reader)
    stack = fit_stack("binary", network, kmer, rows["valid"][1])
    component = stack.saved(kmer_model)
    classifier.kmer = None if component is None else component.bind(classifier.tokenizer)
    return report | stack.describe() | {"saved_model": stack.label()}


def score_splits(classifier: Classifier, splits: dict[str, list], batch_size: int = 256) -> dict:
    """The F1-best threshold on ``splits["valid"]``; the metrics of every split but ``train``, overall and
    per source pair, each record scored as ``predict-promoter`` scores it (its best window)."""
    scores = {
        name: (np.array([r.label for r in records]),
               best_window_probabilities(classifier, [r.sequence for r in records], batch_size,
                                         classifier.info.window_bp)[:, 0])
        for name, records in splits.items() if name != "train"
    }
    threshold = best_f1_threshold(*scores["valid"])
    return {
        "threshold": threshold,
        "threshold_chosen_on": "valid (max F1)",
        "valid": promoter_metrics(*scores["valid"], threshold),
        "test": promoter_metrics(*scores["test"], threshold),
        "by_source": {name: pair_metrics(*scores[name], threshold, [r.source for r in splits[name]])
                      for name in ("test", "valid", "random_test") if name in scores},
    }


def results_table(report: dict) -> str:
    """The ensemble, the network alone and the k-mer baseline on the held-out and the random split."""
    kmer, network = report["kmer_baseline"], report["network"]
    rows = {}
    for split, what in (("test", "held-out sources"), ("random_test", "random split")):
        rows[f"this model, {what} ({split})"] = report["by_source"][split]["all"]
        rows[f"its network alone, {what} ({split})"] = network["by_source"][split]["all"]
        rows[f"k-mer baseline, {what} ({split})"] = kmer["by_source"][split]["all"]
    return format_metrics_table(rows)


def roles(manifest: dict) -> dict[str, list[str]]:
    """The source groups of a dataset by role: ``{"train": [...], "valid": [...], "test": [...]}``."""
    by_role: dict[str, list[str]] = {}
    for group, role in manifest["split"]["roles"].items():
        by_role.setdefault(role, []).append(group)
    return by_role


def other_direction(manifest: dict, report: dict) -> str:
    """The held-out pairs of a run of another spec, with what it was trained and validated on."""
    groups = roles(manifest)
    return f"""Trained on {", ".join(groups["train"])}; validated on {", ".join(groups["valid"])}; tested on
{", ".join(groups["test"])}:

{format_pair_table({"test": report["by_source"]["test"]}, {"test": report["kmer_baseline"]["by_source"]["test"]})}
"""


def readme(report: dict, manifest: dict, commit: str, others: list[tuple[dict, dict]]) -> str:
    """The model's README: data, commands, commit, stacking, threshold and every metric table.

    ``others``: (manifest, report) of finished runs of the same recipe on other specs.
    """
    kmer, stacking = report["kmer_baseline"], report["calibration"]
    weights = [stacking.get(key, 0.0) for key in ("network_weight", "kmer_weight", "offset")]
    files = "\n".join(
        f"- `{Path(s['path']).name}` ({s['group']}, {s['role']}), sha256 `{s['sha256']}`" for s in manifest["sources"]
    )
    counts = ", ".join(
        f"{split} {c['1']:,} promoters / {c['0']:,} non-promoters" for split, c in manifest["counts"].items()
    )
    other_sections = "" if not others else """
The same recipe on the other specs (`--spec mouse_to_dbtss`, `--spec plant_to_mouse`), not
shipped, for the cross-source table. """ + "\n".join(other_direction(*other) for other in others)
    return f"""# Default promoter model

`genolong predict-promoter` and `genolong scan` use this model when no `--model` is given. It was produced by

    python scripts/train_default_promoter_model.py --work WORK --install

with the code of commit `{commit}` for the network and `{report.get("ensemble_commit", commit)}` for the
k-mer model and the stacking (torch {report["torch"]}, {platform.machine()}, 2-core AMD EPYC CPU,
no GPU; dataset, training and stacking took {report["seconds"] / 60:.0f} min of wall-clock time, which other jobs
on the machine lengthen). Its
first two steps are

    genolong promoter prepare-sources --spec {SPEC} --root ../shared/data --out WORK/data
    genolong promoter finetune --data WORK/data --out WORK/run --config {PRESET}

then the k-mer model is fitted and stacked with the network (`genolong.evaluation.kmer_models`).

**Trained on**: {TRAINED_ON}.

**Model**: preset `{PRESET}` from scratch, {report["parameters"]:,} parameters, backbone `{report["backbone"]}`,
one token per base, a residual 15-bp convolution over the token embeddings and a [CLS] read-out; best
validation F1 at step {report["best_step"]} of {report["steps"]}. Then the k-mer model, a {stacking["model"]} on the
frequencies of {stacking["features"]:,} k-mers (k = 4..6, C {stacking["C"]:g}), and its stack with the network,
fitted on the validation sources: the saved model is the {stacking["saved_model"]} (`kmer_component.npz` holds
the k-mer part, which reads the bases the network reads), chosen by {stacking["chosen_by"]}; the stack's
logit is `{weights[0]:.3f} * network logit + {weights[1]:.3f} * k-mer logit {weights[2]:+.3f}`.

**Threshold**: {report["threshold"]:.4f}, the F1-best threshold on the validation sources.

**Records**: any length from {report["min_bp"]} bp. Records up to {report["window_bp"]} bp are scored
whole; longer ones are scanned in {report["window_bp"]}-bp windows (stride {record_stride(report["window_bp"])} bp) and get their best
window's probability. The network was trained on random crops of 240 bp up to the whole 251- or
300-bp window, so the TSS need not sit at one offset.

**Data** (`configs/promoter_sources/{SPEC}.yaml`; sets of Umarov & Solovyev 2016 and
DeePromoter, MIT; genomes from Bioconductor, Artistic-2.0; see `../shared/data/README.md`).
Identical sequences are removed across all sources before splitting: {counts}.

{files}

**Results**, next to the network alone and the k-mer baseline fitted on the same training data
(its C and threshold chosen on the same validation sources):

```
{results_table(report)}
```

Per pair of sources (test: *A. thaliana*, never seen in training or selection; valid: mouse
DBTSS vs yeast, which chose the checkpoint, the stacking and the threshold; random_test: a
random 10% of the training sources; derived negatives are paired with the promoters they were
made from). Note that `Mouse_tata` and `mm_pos_TATA` hold windows of the same promoters, so the
random split shares promoters (not sequences) between train and random_test:

{format_pair_table(report["by_source"], kmer["by_source"])}
{other_sections}
Metrics: {", ".join(PROMOTER_METRICS)} (scikit-learn) at the thresholds chosen on validation; ECE:
10 equal-width bins. `genolong_task.json` holds the full report and configuration.
"""


def install(ensemble: Path, report: dict, manifest: dict, commit: str, others: list[tuple[dict, dict]]) -> Path:
    """Copy the ensemble into the package (atomically) with its README."""
    target = default_promoter_model()
    with atomic_path(target, directory=True) as tmp:
        for path in ensemble.iterdir():
            shutil.copy2(path, tmp / path.name)
        task = json.loads((tmp / "genolong_task.json").read_text())
        task["provenance"].pop("genolong_run", None)  # a path on the training machine
        task["provenance"]["trained_on"] = TRAINED_ON
        (tmp / "genolong_task.json").write_text(json.dumps(task, indent=2) + "\n")
        (tmp / "README.md").write_text(readme(report, manifest, commit, others))
        for path in tmp.iterdir():  # package data: readable by all (temporary files are private)
            path.chmod(0o644)
        tmp.chmod(0o755)
    size = sum(p.stat().st_size for p in target.iterdir())
    print(f"installed {target} ({size / 1e6:.1f} MB)")
    return target


def scan_threshold(model: Path, data_root: Path, work: Path, install_it: bool) -> None:
    """Set the model's scan threshold (scans kept under ``WORK/scan_threshold/<model digest>``), print the
    card's section, and with ``install_it`` write both into the model directory."""
    digest = hashlib.sha256()
    for name in ("model.safetensors", "kmer_component.npz"):
        if (model / name).is_file():
            digest.update((model / name).read_bytes())
    genomes = {}
    for background in BACKGROUNDS:  # indexed bgzip copies, which scan reads at random
        genomes[background] = work / "genomes" / (Path(background.file).name.removesuffix(".gz") + ".bgz")
        if not genomes[background].exists():
            prepare_genome(data_root / "genomes" / background.file, genomes[background])
    calibration = calibrate(model, data_root, work / "scan_threshold" / digest.hexdigest()[:12], genomes,
                            PROMOTER_RECALL, alternatives=ALTERNATIVES)
    print(card_section(calibration, SPECIES))
    if install_it:
        install_scan_calibration(model, calibration, SPECIES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-root",
        type=Path,
        default=REPO.parent / "shared" / "data",
        help="directory with promoters/ and genomes/ (default: ../shared/data)",
    )
    parser.add_argument("--work", type=Path, required=True, help="working directory (dataset and run)")
    parser.add_argument(
        "--spec", default=SPEC, help=f"source spec (default: {SPEC}; mouse_to_dbtss, plant_to_mouse: other directions)"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="override the preset's max_steps")
    parser.add_argument("--install", action="store_true", help="copy the model into the package")
    parser.add_argument("--scan-threshold-only", action="store_true",
                        help="only set the scan threshold of the model in the package (written with --install)")
    parser.add_argument(
        "--other-work",
        type=Path,
        action="append",
        default=[],
        help="a finished working directory of another spec whose held-out pairs the README lists (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.install and args.spec != SPEC:
        parser.error(f"only the {SPEC} spec's model is installed")

    if args.scan_threshold_only:
        scan_threshold(default_promoter_model(), args.data_root, args.work, args.install)
        return 0
    data, run = args.work / "data", args.work / "run"
    manifest = build_dataset(args.data_root, data, args.spec)
    network = train_network(data, run, args.max_steps)
    if network is None:
        return 1
    report = build_ensemble(data, run, network)
    print(results_table(report))
    print(format_pair_table(report["by_source"], report["kmer_baseline"]["by_source"]))
    if args.install:
        commit = (run / COMMIT_FILE).read_text().strip() if (run / COMMIT_FILE).is_file() else "unknown"
        others = [
            (load_manifest(work / "data"), Classifier.load(work / "run" / "ensemble", device="cpu").info.provenance["report"])
            for work in args.other_work
        ]
        scan_threshold(install(run / "ensemble", report, manifest, commit, others), args.data_root, args.work, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
