"""The stack of a network and its k-mer model as a classifier directory keeps it, for every problem
type: the saved form (head fold + :class:`KmerComponent`) gives the fitted stack's logits, its
file round-trips, and the single-output files written before (the shipped promoter model's) read
as they did."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.task_finetune import micro_preset

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.classifier.kmer_component import COMPONENT_FILE, KmerComponent
from genolong.classifier.scoring import token_logits
from genolong.cli.main import main
from genolong.core.errors import InputError
from genolong.dna.sequence import read_fasta
from genolong.evaluation.kmer_baseline import KmerBaselineConfig
from genolong.evaluation.kmer_models import KmerModelConfig, fit_kmer_model, fit_stack
from genolong.evaluation.task_metrics import METRICS

BASES = np.array(list("ACGT"))
MOTIFS = ["GGGCGGGG", "TATAAAAG", "CACGTGAC"]
CONFIG = KmerModelConfig(KmerBaselineConfig(k_min=3, k_max=4, Cs=(0.1, 1.0)))


class CharTokenizer:
    """One token per base, as :meth:`KmerComponent.bind` reads a tokenizer."""

    all_special_ids = [0, 1, 2]

    def get_vocab(self) -> dict[str, int]:
        return {"[CLS]": 0, "[SEP]": 1, "[PAD]": 2, "A": 3, "C": 4, "G": 5, "T": 6, "N": 7}

    def rows(self, sequences: list[str]) -> torch.Tensor:
        """(B, L + 2) ids ``[CLS] bases [SEP]`` of equal-length sequences."""
        vocab = self.get_vocab()
        return torch.tensor([[0, *(vocab[b] for b in s), 1] for s in sequences])


def motif_task(problem: str, count: int, seed: int, with_n: bool = True) -> tuple[list[str], np.ndarray]:
    """60-bp random sequences with a random subset of the motifs (one for multiclass), and targets
    (N, K); with ``with_n``, every other sequence has an N at base 30."""
    rng = np.random.default_rng(seed)
    sequences, present = [], np.zeros((count, 3))
    for i in range(count):
        chars = BASES[rng.integers(0, 4, 60)]
        chosen = [i % 3] if problem == "multiclass" else np.flatnonzero(rng.random(3) < 0.5)
        for m in chosen:
            chars[2 + 20 * m : 10 + 20 * m] = list(MOTIFS[m])
            present[i, m] = 1
        if with_n and i % 2:
            chars[30] = "N"
        sequences.append("".join(chars))
    targets = {"binary": present[:, :1], "multiclass": present.argmax(axis=1)[:, None], "multilabel": present,
               "regression": present[:, :2] * [1.0, 2.0] + rng.normal(0, 0.1, (count, 2))}[problem]
    return sequences, targets


def weak_network(problem: str, targets: np.ndarray, seed: int) -> np.ndarray:
    """Logits (N, C) of a poor network: noise with a little signal."""
    rng = np.random.default_rng(seed)
    if problem == "multiclass":
        return 0.3 * np.eye(3)[targets[:, 0].astype(int)] + rng.normal(0, 1, (len(targets), 3))
    return 0.3 * targets + rng.normal(0, 1, targets.shape)


@pytest.mark.parametrize("problem", ["binary", "multiclass", "multilabel", "regression"])
def test_the_saved_stack_gives_the_fitted_stacks_logits(problem):
    tokenizer = CharTokenizer()
    train, valid = motif_task(problem, 120, seed=1), motif_task(problem, 60, seed=2)
    kmer_model, _ = fit_kmer_model(problem, train, valid, CONFIG)
    network = weak_network(problem, valid[1], seed=3)
    stack = fit_stack(problem, network, kmer_model.logits(valid[0]), valid[1])
    expected = stack.logits(network, kmer_model.logits(valid[0]))  # (N, C); multiclass: log-probabilities
    component = stack.saved(kmer_model)
    assert component is not None  # the k-mer model is far better than the network: it has weight
    saved = component.bind(tokenizer).apply(torch.from_numpy(network).float(), tokenizer.rows(valid[0])).double()
    if problem == "multiclass":
        saved = torch.log_softmax(saved, dim=1)
    assert saved.shape == expected.shape
    np.testing.assert_allclose(saved.numpy(), expected, atol=1e-5, rtol=1e-6)  # float32 network logits


def test_a_multi_output_component_file_round_trips(tmp_path):
    tokenizer = CharTokenizer()
    rng = np.random.default_rng(0)
    kmers = ["ACG", "CGT", "GGGG", "TATA"]
    component = KmerComponent(kmers, rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=(3, 3)),
                              "log_softmax", rng.normal(size=3), rng.normal(size=(3, 3)), "log_softmax")
    component.save(tmp_path)
    loaded = KmerComponent.load(tmp_path, tokenizer)
    rows, network = tokenizer.rows(["ACGTATAGGGG", "TTTTTTTTTTT"]), torch.randn(2, 3)
    assert torch.equal(loaded.apply(network, rows), component.bind(tokenizer).apply(network, rows))
    with np.load(tmp_path / COMPONENT_FILE) as data:
        assert int(data["version"]) == 2 and data["mix"].shape == (3, 3) and data["network"].shape == (3, 3)
    assert loaded.network_input == "log_softmax"


def test_a_component_file_of_a_newer_format_is_one_line_naming_it(tmp_path):
    np.savez(tmp_path / COMPONENT_FILE, version=np.array(3), kmers=np.array(["ACG"]), weights=np.ones((1, 1)),
             bias=np.zeros(1))
    with pytest.raises(InputError, match="format 3") as raised:
        KmerComponent.load(tmp_path, CharTokenizer())
    assert COMPONENT_FILE in str(raised.value) and "\n" not in str(raised.value)


def test_a_single_output_file_without_a_version_reads_as_before(tmp_path):
    """The first format: ``mix`` (E,) for one output, no offset: logits (B, 1) = sum_e mix_e * link(score_e)."""
    tokenizer = CharTokenizer()
    np.savez(tmp_path / COMPONENT_FILE, kmers=np.array(["ACG", "TATA"]), weights=np.array([[1.0, -2.0], [0.5, 3.0]]),
             bias=np.array([0.1, -0.2]), mix=np.array([2.0, 0.5]), link=np.array("logsigmoid"))
    component = KmerComponent.load(tmp_path, tokenizer)
    sequences = ["ACGTATAA", "CCCCCCCC"]
    scores = component.scores(sequences)  # (B, E)
    old = (-np.logaddexp(0.0, -scores)) @ np.array([2.0, 0.5])  # (B,)
    assert component.mix.shape == (1, 2) and np.array_equal(component.logits(sequences), old[:, None])
    network = torch.zeros(2, 1)
    assert torch.equal(component.apply(network, tokenizer.rows(sequences)), torch.from_numpy(old).float()[:, None])


def test_the_shipped_promoter_models_logits_are_unchanged(real_data):
    """Its single-output component (a file of the first format) adds, bit for bit, what it added
    before: the network's logit plus ``sum_e mix_e * log sigmoid(score_e)`` rounded to float32."""
    classifier = Classifier.load(default_promoter_model(), task="promoter", device="cpu")
    sequences = [record.sequence for record in read_fasta(real_data / "promoters" / "Mouse_tata.fa")][:8]
    batch = classifier.encode(sequences)
    with np.load(default_promoter_model() / COMPONENT_FILE) as data:
        assert "version" not in data.files  # the first format
        mix = data["mix"]
    network = token_logits(classifier.model, batch["input_ids"], batch["attention_mask"], precision=classifier.precision)
    scores = classifier.kmer.token_scores(batch["input_ids"])
    old = torch.from_numpy((-np.logaddexp(0.0, -scores)) @ mix).float()
    assert torch.equal(classifier.token_logits(batch), network + old[:, None])


def micro_config(path):
    """A one-layer network trained 4 steps: poor on purpose, so that the stack must lean on the k-mer model."""
    return micro_preset(path, max_steps=4, val_every_steps=2, warmup_steps=1, log_every_steps=2,
                        checkpoint_every_steps=4)


def write_table(path, problem: str, sequences: list[str], targets: np.ndarray) -> None:
    """A CSV of the sequences and their targets (multiclass: class names a, b, c)."""
    names = [f"y{j}" for j in range(targets.shape[1])]
    cells = {"multiclass": lambda v: "abc"[int(v)], "regression": lambda v: str(float(v))}.get(problem, lambda v: str(int(v)))
    path.write_text("sequence," + ",".join(names) + "\n"
                    + "".join(s + "," + ",".join(map(cells, row)) + "\n" for s, row in zip(sequences, targets, strict=True)))


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["binary", "multiclass", "multilabel", "regression"])
def test_the_saved_model_is_the_stack_and_every_command_scores_it(problem, small_genome, tmp_path):
    sequences, targets = motif_task(problem, 400, seed=4, with_n=False)
    write_table(tmp_path / "rows.csv", problem, sequences, targets)
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--problem-type", problem,
                 "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "run"
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out),
                 "--config", str(micro_config(tmp_path / "micro.yaml"))]) == 0
    report = json.loads((out / "report.json").read_text())
    metric = METRICS[problem].monitor  # chance: AUROC 0.5, accuracy 1/3, Pearson 0
    assert "network" not in report["stack"]["kept"] and report["saved_model"] != "network"  # a poor network
    assert report["kmer_baseline"]["test"][metric] >= 0.75
    assert report["network"]["test"][metric] < report["kmer_baseline"]["test"][metric] - 0.1  # a poor network
    for split in ("valid", "test"):  # the saved model's metrics are the stack's
        assert report[split][metric] == pytest.approx(report["stack"][split][metric], abs=1e-6)
    assert report["test"][metric] >= report["kmer_baseline"]["test"][metric] - 0.05  # 40 test rows

    classifier = Classifier.load(out / "model", task="labelled", device="cpu")
    test = [line.split("\t") for line in (tmp_path / "data" / "test.tsv").read_text().splitlines()]
    column = test[0].index("sequence")
    assert main(["task", "predict", str(tmp_path / "data" / "test.tsv"), "--model", str(out / "model"),
                 "--out", str(tmp_path / "predictions.tsv")]) == 0
    predicted = np.loadtxt(tmp_path / "predictions.tsv", delimiter="\t", skiprows=1, usecols=range(4, 4 + len(
        classifier.info.label_names)), ndmin=2)  # after record, id, length, windows
    expected = classifier.probabilities([row[column] for row in test[1:]])
    np.testing.assert_allclose(predicted, expected, rtol=1e-5, atol=1e-6)  # the TSV's 6 significant digits

    genome = small_genome.read_text().split("\n")[1]
    (tmp_path / "v.vcf").write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                                    f"a\t150\tv1\t{genome[149]}\t{'A' if genome[149] != 'A' else 'C'}\t.\t.\t.\n")
    (tmp_path / "q.fa").write_text(f">q1\n{genome[100:160]}\n")
    assert main(["scan", "--model", str(out / "model"), "--genome", str(small_genome),
                 "--out", str(tmp_path / "scan.h5")]) == 0
    assert main(["score-variants", "--model", str(out / "model"), "--vcf", str(tmp_path / "v.vcf"),
                 "--genome", str(small_genome), "--out", str(tmp_path / "variants.tsv")]) == 0
    assert main(["explain", "--model", str(out / "model"), str(tmp_path / "q.fa"),
                 "--out", str(tmp_path / "explain"), "--ism-window", "6", "--ig-steps", "2"]) == 0
    assert (tmp_path / "scan.h5").is_file() and (tmp_path / "variants.tsv").is_file()
    assert (tmp_path / "explain" / "records.tsv").is_file()


def synthetic_logits(problem: str, network_signal: float, kmer_signal: float, seed: int, count: int = 400):
    """Targets (N, K) and the network's and the k-mer model's logits (N, C), each ``signal * truth +
    noise`` with independent noise (binary, multi-label: two outputs; regression: two; multi-class:
    3 classes, as log-probabilities)."""
    rng = np.random.default_rng(seed)
    if problem == "multiclass":
        classes = rng.integers(0, 3, count)
        truth = np.eye(3)[classes]
        targets = classes[:, None].astype(float)
    elif problem == "regression":
        targets = truth = rng.normal(0, 1, (count, 2))
    else:
        targets = truth = (rng.random((count, 1 if problem == "binary" else 2)) < 0.4).astype(float)

    def logits(signal):
        values = signal * truth + rng.normal(0, 1, truth.shape)
        if problem == "multiclass":
            values = values - np.log(np.exp(values).sum(axis=1, keepdims=True))
        return values

    return targets, logits(network_signal), logits(kmer_signal)


@pytest.mark.parametrize("problem", ["binary", "multiclass", "multilabel", "regression"])
@pytest.mark.parametrize(("network_signal", "kmer_signal", "kept"), [
    (0.0, 2.0, "k-mer model"),  # a network of pure noise never enters the saved model
    (1.5, 1.5, "stack"),  # two equal, independent views: their stack beats each alone
])
def test_each_output_keeps_the_best_of_kmer_network_and_out_of_fold_stack(problem, network_signal, kmer_signal, kept):
    targets, network, kmer = synthetic_logits(problem, network_signal, kmer_signal, seed=5)
    stack = fit_stack(problem, network, kmer, targets)
    assert set(stack.chosen) == {kept}
    described = stack.describe()
    assert described["kept"] == {kept: len(stack.chosen)}
    if kept == "k-mer model":  # the saved outputs are the k-mer model's, exactly
        assert np.array_equal(stack.logits(network, kmer), kmer)


def test_the_out_of_fold_score_is_below_the_in_sample_one_and_ties_go_to_the_kmer_model():
    """A network of noise, stacked on 60 rows, looks better in sample than out of fold; the k-mer
    model equal to the network (same logits) wins the tie."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    targets, network, kmer = synthetic_logits("binary", 0.0, 1.0, seed=8, count=60)
    x, y = np.hstack([network, kmer]), targets[:, 0].astype(int)
    in_sample = roc_auc_score(y, LogisticRegression(C=1e4, max_iter=2000).fit(x, y).decision_function(x))
    assert fit_stack("binary", network, kmer, targets).scores[0]["stack"] < in_sample
    assert fit_stack("binary", kmer, kmer, targets).chosen == ["k-mer model"]


def test_an_output_with_one_row_of_a_class_is_one_of_the_two_models_alone():
    targets, network, kmer = synthetic_logits("multilabel", 2.0, 0.0, seed=9, count=50)
    targets[:, 1] = 0
    targets[0, 1] = 1
    stack = fit_stack("multilabel", network, kmer, targets)
    assert stack.chosen[0] != "k-mer model" and stack.chosen[1] in ("network", "k-mer model")
    assert np.isnan(stack.scores[1]["stack"])


def test_on_records_longer_than_the_input_the_report_scores_what_the_saved_model_reads(tmp_path):
    """300-bp records (motifs in the central 60 bp) through a 72-token model: the network and the
    saved k-mer part read the central window, and so do the report's k-mer model and stack."""
    sequences, targets = motif_task("multilabel", 300, seed=6, with_n=False)
    rng = np.random.default_rng(7)
    flank = lambda: "".join(BASES[rng.integers(0, 4, 120)])  # noqa: E731
    write_table(tmp_path / "rows.csv", "multilabel", [flank() + s + flank() for s in sequences], targets)
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--problem-type", "multilabel",
                 "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "run"
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out),
                 "--config", str(micro_config(tmp_path / "micro.yaml"))]) == 0
    report = json.loads((out / "report.json").read_text())
    assert "network" not in report["stack"]["kept"]  # the k-mer part is in every output
    for split in ("valid", "test"):
        for metric in ("median_auroc", "median_auprc"):
            assert report[split][metric] == pytest.approx(report["stack"][split][metric], abs=1e-6)


@pytest.mark.parametrize("problem", ["binary", "multiclass", "multilabel", "regression"])
def test_the_kmer_model_as_a_component_gives_its_logits(problem):
    train, valid = motif_task(problem, 120, seed=1), motif_task(problem, 60, seed=2)
    kmer_model, _ = fit_kmer_model(problem, train, valid, CONFIG)
    np.testing.assert_allclose(kmer_model.component().logits(valid[0]), kmer_model.logits(valid[0]),
                               rtol=1e-9, atol=1e-9)
