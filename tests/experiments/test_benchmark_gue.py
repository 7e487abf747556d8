"""The GUE suite (benchmarks/gue_suite.yaml) on fixture GUE folders built under tmp_path: two
tasks, a micro model, one seed; published references beside our numbers in summary.md, the figure
and references.csv; planted leakage (exact and reverse-complement test copies, training rows with
conflicting labels) counted exactly; references without a source refused in one line."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml
from helpers.benchmark_suites import micro_model, refused, write_suite

from genolong.cli.main import main
from genolong.dna.sequence import reverse_complement
from genolong.experiments.suites.report import REFERENCE_COLUMNS, summary_markdown

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "gue_suite.yaml"


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("sequence,label\n" + "".join(f"{r['sequence']},{r['label']}\n" for r in rows))


def planted_gue(root: Path, source: Path) -> Path:
    """A GUE folder with two tasks copied from ``source``: mouse/0 with 2 exact and 1 reverse-complement
    test copies of training rows and 4 training rows whose copies (2 exact, 2 reverse complement)
    have other labels; prom/prom_300_tata as it is."""
    shutil.copytree(source, root / "prom" / "prom_300_tata")
    task = root / "mouse" / "0"
    shutil.copytree(source, task)
    train, test = read_rows(task / "train.csv"), read_rows(task / "test.csv")
    flipped = {"0": "1", "1": "0"}
    test[0]["sequence"], test[1]["sequence"] = train[0]["sequence"], train[1]["sequence"]
    test[2]["sequence"] = reverse_complement(train[2]["sequence"])
    train += [{"sequence": train[3]["sequence"], "label": flipped[train[3]["label"]]},
              {"sequence": reverse_complement(train[4]["sequence"]), "label": flipped[train[4]["label"]]}]
    write_rows(task / "train.csv", train)
    write_rows(task / "test.csv", test)
    return root


def test_the_gue_suite_shows_published_numbers_and_planted_leakage(real_data, tmp_path, capsys):
    root = planted_gue(tmp_path / "GUE", real_data / "benchmarks" / "gue_mouse_tata")
    out = tmp_path / "out"
    assert main(["benchmark", str(SUITE), "--set", f"root={root}", "--set", "seeds=[0]",
                 "--set", "models=" + json.dumps([micro_model()]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skipped 26 tasks whose folder is not under" in printed and "EMP_H3," in printed
    leakage = {row["task"]: row for row in read_rows(out / "leakage.csv")}
    assert {k: leakage["mouse_0"][k] for k in ("exact", "reverse_complement", "conflicting")} == {
        "exact": "2", "reverse_complement": "1", "conflicting": "4"}
    assert {k: leakage["prom_300_tata"][k] for k in ("exact", "reverse_complement", "conflicting")} == {
        "exact": "0", "reverse_complement": "0", "conflicting": "0"}
    results = read_rows(out / "results.csv")
    assert {r["model"] for r in results} == {"k-mer", "micro"}  # measured rows only
    assert {(r["task"], r["test_rows_without_leaked"]) for r in results} == {("prom_300_tata", "12"), ("mouse_0", "9")}
    references = read_rows(out / "references.csv")
    assert tuple(references[0]) == REFERENCE_COLUMNS
    assert [(r["task"], r["reference"], r["published"], r["value"]) for r in references] == [
        ("prom_300_tata", "DNABERT-2", "71.59", "0.715900"), ("prom_300_tata", "NT-2500M-multi", "79.43", "0.794300"),
        ("mouse_0", "DNABERT-2", "56.76", "0.567600"), ("mouse_0", "NT-2500M-multi", "63.31", "0.633100")]
    summary = (out / "summary.md").read_text()
    assert "## Published references" in summary
    assert "| prom_300_tata (mcc) | DNABERT-2 | 0.7159 | DNABERT-2 paper, Table 4 |" in summary
    assert "| conflicting train rows |" in summary and (out / "figure.png").stat().st_size > 5000
    (out / "summary.md").unlink()
    assert main(["benchmark", "report", str(out)]) == 0  # redrawn from results.csv and references.csv
    assert (out / "summary.md").read_text() == summary


def test_references_show_the_difference_and_whether_they_lie_inside_our_interval():
    def row(model: str, mode: str, value: float) -> dict:
        return {"task": "t", "model": model, "mode": mode, "metric": "mcc", "value": value, "auroc": 0.9,
                "value_without_leaked": value}

    rows = [row("k-mer", "-", 0.5)] + [row("net", "full", v) for v in (0.6, 0.7, 0.8)]
    references = [{"task": "t", "reference": "A", "metric": "mcc", "value": 0.75, "source": "paper, Table 1"},
                  {"task": "t", "reference": "B", "metric": "mcc", "value": 0.99, "source": "paper, Table 1"}]
    summary = summary_markdown(rows, [], 0.95, references)
    # ours 0.7 ± 0.248 (t(0.975, 2) * 0.1 / sqrt 3): A lies inside, B outside; the k-mer row has no interval
    assert "| t (mcc) | A | 0.7500 | paper, Table 1 | 0.500 (-0.250) | 0.700 ± 0.248 (-0.050, inside) |" in summary
    assert "| t (mcc) | B | 0.9900 | paper, Table 1 | 0.500 (-0.490) | 0.700 ± 0.248 (-0.290, outside) |" in summary
    assert "Published references" not in summary_markdown(rows, [], 0.95)


@pytest.mark.parametrize(("reference", "expected"), [
    ({"values": {"DNABERT-2": 71.59}, "percent": True}, "task gue: the reference has no source"),
    ({"values": {"DNABERT-2": 0.7}, "source": "paper", "metric": "auroc"},
     "task gue: the reference reports auroc but the task's metric is mcc"),
    ({"source": "paper"}, "task gue: the reference has no values"),
])
def test_a_reference_without_a_source_or_of_another_metric_is_refused_in_one_line(real_data, tmp_path, capsys,
                                                                                   reference, expected):
    task = {"name": "gue", "layout": "gue", "path": str(real_data / "benchmarks" / "gue_mouse_tata"),
            "reference": reference}
    suite = write_suite(tmp_path / "suite.yaml", [task])
    line = refused(["benchmark", suite, "--out", str(tmp_path / "out")], capsys)
    assert f"error: {suite}: " in line and expected in line
    assert not (tmp_path / "out").exists()


def test_the_gue_suite_without_its_folders_is_refused_in_one_line(tmp_path, capsys):
    line = refused(["benchmark", str(SUITE), "--set", f"root={tmp_path}", "--out", str(tmp_path / "out")], capsys)
    assert f"none of the task folders is there under root {tmp_path}" in line and "--set root=DIR" in line
    assert yaml.safe_load(SUITE.read_text())["missing"] == "skip"
