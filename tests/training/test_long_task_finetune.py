"""``genolong task finetune --model CONVERTED`` at a length the source model never had, for each
problem type of the generic tasks, then ``task predict``, ``scan`` and ``score-variants``.

The source is a tiny random masked-LM model with 128 positions (at most about 400 bp with the
64-token tokenizer); ``convert --backbone lsg --max-length 1024`` makes it long, and 1-2 kb records
are fine-tuned whole at ``max_len`` 1,024: the fine-tune must not crop them (no warning), the saved
classifier must keep the long window, and ``scan`` accepts a stride only a long window allows.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.classify import tiny_masked_lm

from genolong.cli.main import main
from genolong.dna.sequence import read_fasta
from genolong.dna.tokenizer import load_tokenizer
from genolong.resources import sample_genome

TRAINED, LONG = 128, 1024
BASES = np.array(list("ACGT"))
MICRO = ["--max-steps", "2", "--val-every", "2", "--batch-size", "8", "--set", "train.warmup_steps=1",
         "--set", "kmer_baseline=false", "--set", "batch_size_eval=16", "--set", f"max_len={LONG}"]
LABELS = {
    "regression": ("gc,at", lambda s: f"{(s.count('G') + s.count('C')) / len(s):.4f},"
                                      f"{(s.count('A') + s.count('T')) / len(s):.4f}"),
    "multiclass": ("label", lambda s: "abc"[len(s) % 3]),
    "binary": ("label", lambda s: str(int(s.count("G") > s.count("C")))),
    "multilabel": ("g_rich,a_rich", lambda s: f"{int(s.count('G') > s.count('C'))},{int(s.count('A') > s.count('T'))}"),
}


@pytest.fixture(scope="module")
def long_model(tmp_path_factory):
    """(work directory, converted model directory): 128 positions made 1,024 with LSG attention."""
    work = tmp_path_factory.mktemp("long_task")
    (work / "short").mkdir()
    tiny_masked_lm(work / "short", work / "tok", TRAINED, hidden_dropout_prob=0.0)
    assert main(["convert", str(work / "short"), "--out", str(work / "long"), "--backbone", "lsg",
                 "--max-length", str(LONG)]) == 0
    return work, work / "long"


def write_table(path, problem: str, count: int = 48, seed: int = 0) -> list[str]:
    """Random 1-2 kb sequences with labels of ``problem`` (:data:`LABELS`); returns the sequences."""
    rng = np.random.default_rng(seed)
    header, label = LABELS[problem]
    sequences = ["".join(BASES[rng.integers(0, 4, int(rng.integers(1000, 2000)))]) for _ in range(count)]
    path.write_text(f"sequence,{header}\n" + "".join(f"{s},{label(s)}\n" for s in sequences))
    return sequences


@pytest.fixture(scope="module")
def fine_tuned(long_model, tmp_path_factory):
    """``problem -> (run directory, table, sequences, log)``: the converted model fine-tuned at
    ``max_len`` 1,024 on 1-2 kb records (each problem once per module)."""
    work, model = long_model
    runs = {}

    def run(problem: str, caplog):
        if problem not in runs:
            root = tmp_path_factory.mktemp(problem)
            sequences = write_table(root / "rows.csv", problem)
            assert main(["task", "prepare", "--table", str(root / "rows.csv"), "--problem-type", problem,
                         "--out", str(root / "data")]) == 0
            caplog.clear()
            with caplog.at_level("INFO", logger="genolong"):
                assert main(["task", "finetune", "--data", str(root / "data"), "--model", str(model),
                             "--out", str(root / "run"), *MICRO]) == 0
            runs[problem] = root / "run", root / "rows.csv", sequences, caplog.text
        return runs[problem]

    return run


@pytest.mark.parametrize("problem", ["regression", "multiclass", pytest.param("binary", marks=pytest.mark.slow),
                                     pytest.param("multilabel", marks=pytest.mark.slow)])
def test_a_converted_model_fine_tunes_and_predicts_records_longer_than_its_source_positions(
        long_model, fine_tuned, problem, tmp_path, caplog):
    work, _ = long_model
    run, table, sequences, log = fine_tuned(problem, caplog)
    tokenizer = load_tokenizer(work / "tok")
    lengths = [len(tokenizer(s)["input_ids"]) for s in sequences]
    assert min(lengths) > TRAINED and max(lengths) <= LONG - 2  # longer than the source, whole at LONG
    assert "training GenolongForSequenceClassification" in log and "longer than max_len" not in log
    report = json.loads((run / "report.json").read_text())
    assert report["problem_type"] == problem and report["backbone"] == "lsg" and report["max_len"] == LONG
    info = json.loads((run / "model" / "genolong_task.json").read_text())
    assert info["max_len"] == LONG and info["window_bp"] > 1500  # records of 1-2 kb; 128 tokens: under 500 bp
    assert main(["task", "predict", str(table), "--model", str(run / "model"),
                 "--out", str(tmp_path / "predictions.tsv")]) == 0
    with (tmp_path / "predictions.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == len(sequences) and set(info["label_names"]) <= set(rows[0])
    assert all(np.isfinite(float(row[name])) for row in rows for name in info["label_names"])


def test_scan_and_score_variants_read_the_long_window(fine_tuned, tmp_path, caplog, capsys):
    """Both read windows of the classifier's ``window_bp``, which a 128-position model could not."""
    run, _, _, _ = fine_tuned("regression", caplog)
    window = json.loads((run / "model" / "genolong_task.json").read_text())["window_bp"]
    assert main(["scan", "--model", str(run / "model"), "--genome", str(sample_genome()), "--stride", "1500",
                 "--chromosomes", "chrM", "--profiles", "gc", "--out", str(tmp_path / "gc.bedGraph")]) == 0
    assert f"window {window} bp, stride 1500 bp" in capsys.readouterr().err  # 128 tokens: under 500 bp
    bins = [line.split("\t") for line in (tmp_path / "gc.bedGraph").read_text().splitlines()
            if not line.startswith("track")]
    assert len(bins) == 12 and all(np.isfinite(float(value)) for *_, value in bins)
    chrom_m = next(r for r in read_fasta(sample_genome()) if r.name == "chrM").sequence
    ref = chrom_m[7999]
    (tmp_path / "variants.tsv").write_text(f"chrM\t8000\t{ref}\t{'A' if ref != 'A' else 'C'}\tv1\n")
    assert main(["score-variants", "--vcf", str(tmp_path / "variants.tsv"), "--genome", str(sample_genome()),
                 "--model", str(run / "model"), "--out", str(tmp_path / "effects.tsv")]) == 0
    lines = (tmp_path / "effects.tsv").read_text().splitlines()
    assert f'"window": {window},' in next(line for line in lines if line.startswith("##options="))
    effects = [line.split("\t") for line in lines if line.startswith("chrM\t8000\t")]
    assert [row[6] for row in effects] == ["gc", "at"] and all(np.isfinite(float(row[8])) for row in effects)
