"""A binary promoter task fine-tuned on one source, scored on the sources it never saw, beside
its k-mer model.

The run (``genolong task finetune --data DATA --out RUN``) was trained on mouse EPDnew TATA
promoters against mouse non-promoters (``genolong task prepare --class tata=Mouse_tata.fa --class
nonprom=Mouse_nonprom.fa --out DATA``). Its saved model (``RUN/model``, whatever the default
recipe kept: network, k-mer model or stack) and the task's k-mer model (logistic regression on
4..6-mer frequencies, fitted on exactly DATA's training split, its C chosen on DATA's validation
split, as the run's report fits it) score:

* the run's own held-out test split;
* mouse DBTSS TATA promoters (another database) against the test split's non-promoters;
* *A. thaliana* TATA promoters against *A. thaliana* non-promoters (another kingdom);
* *A. thaliana* non-TATA promoters against *A. thaliana* non-promoters (a promoter class the
  task never saw).

Records are scored whole (the run's report reads the bases its network reads, the same for
records that fit the model's input, as these 251-bp ones do in the default recipe). Every scored
sequence found in DATA's training or validation split (exactly or as its reverse
complement) is dropped and counted. AUROC and AUPRC are scikit-learn's.

Run::

    python benchmarks/task_cross_source.py --run RUN --data DATA --promoters ../shared/data/promoters
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

from genolong.classifier.directory import Classifier
from genolong.datasets.task import PreparedTask
from genolong.dna.sequence import read_fasta, reverse_complement
from genolong.evaluation.kmer_models import fit_kmer_model


def read_sequences(path: Path) -> list[str]:
    return [record.sequence.upper() for record in read_fasta(path, unique_names=False)]


def labelled(positives: list[str], negatives: list[str]) -> tuple[list[str], np.ndarray]:
    return positives + negatives, np.r_[np.ones(len(positives)), np.zeros(len(negatives))]


def scored_sets(data: PreparedTask, promoters: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """Name -> (sequences, 0/1 labels) of every scored set; the test split in its own order, as
    the run's report scores it."""
    test = data["test"]
    labels = test.targets()[:, 0]
    negatives = [s for s, y in zip(test.sequences, labels, strict=True) if y == 0]
    arabidopsis_negatives = read_sequences(promoters / "Arabidopsis_non_prom.fa")
    return {
        "held-out test split (mouse EPDnew TATA vs mouse non-promoters)": (test.sequences, labels),
        "mouse DBTSS TATA vs the test split's mouse non-promoters": labelled(
            read_sequences(promoters / "Mouse_tata_dbtss.fa"), negatives),
        "A. thaliana TATA vs A. thaliana non-promoters": labelled(
            read_sequences(promoters / "Arabidopsis_tata.fa"), arabidopsis_negatives),
        "A. thaliana non-TATA vs A. thaliana non-promoters": labelled(
            read_sequences(promoters / "Arabidopsis_non_tata.fa"), arabidopsis_negatives),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a genolong task finetune output directory")
    parser.add_argument("--data", type=Path, required=True, help="the task dataset it was trained on")
    parser.add_argument("--promoters", type=Path, required=True, help="the directory of the promoter FASTA files")
    parser.add_argument("--out", type=Path, help="also write the table as CSV here")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="sequences per model call: the run's batch_size_eval (default 64), so that the "
                             "test split is scored in the report's batches, to the same bits")
    args = parser.parse_args()

    data = PreparedTask(args.data)
    classifier = Classifier.load(args.run / "model", task="labelled", device="cpu")
    train = (data["train"].sequences, data["train"].targets())
    kmer_model, _ = fit_kmer_model("binary", train, (data["valid"].sequences, data["valid"].targets()))
    seen = {s.upper() for split in ("train", "valid") for s in data[split].sequences}
    seen |= {reverse_complement(s) for s in seen}

    rows = []
    print(f"saved model: {args.run / 'model'}; k-mer model: logistic regression, C={kmer_model.C}")
    print(f"{'set':<66} {'pos':>5} {'neg':>5} {'dropped':>7}  {'model AUROC':>11} {'k-mer AUROC':>11}"
          f"  {'model AUPRC':>11} {'k-mer AUPRC':>11}")
    for name, (all_sequences, all_labels) in scored_sets(data, args.promoters).items():
        unseen = [s.upper() not in seen for s in all_sequences]
        sequences = [s for s, keep in zip(all_sequences, unseen, strict=True) if keep]
        labels, dropped = np.asarray(all_labels)[unseen], len(all_sequences) - len(sequences)
        model = np.concatenate([classifier.probabilities(sequences[i:i + args.batch_size])[:, 0]
                                for i in range(0, len(sequences), args.batch_size)])
        kmer = kmer_model.logits(sequences)[:, 0]
        positives, negatives = int(labels.sum()), int(len(labels) - labels.sum())
        row = {"set": name, "positives": positives, "negatives": negatives, "dropped_as_seen": dropped,
               "model_auroc": roc_auc_score(labels, model), "kmer_auroc": roc_auc_score(labels, kmer),
               "model_auprc": average_precision_score(labels, model),
               "kmer_auprc": average_precision_score(labels, kmer)}
        rows.append(row)
        print(f"{name:<66} {positives:>5} {negatives:>5} {dropped:>7}  {row['model_auroc']:>11.4f} "
              f"{row['kmer_auroc']:>11.4f}  {row['model_auprc']:>11.4f} {row['kmer_auprc']:>11.4f}")
    if args.out is not None:
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
