"""A benchmark's reports from its rows: ``results.csv`` (only what was measured), ``references.csv``
(the numbers others published), ``leakage.csv``, ``summary.md`` and ``figure.png``; the guide
(``docs/guide/compare-benchmark.md``) describes them. Intervals are ``mean ± half-width`` of the
Student's t interval over seeds (:func:`genolong.evaluation.metrics.mean_interval`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import yaml

from genolong.core.errors import InputError
from genolong.core.files import atomic_path, atomic_write_text
from genolong.evaluation.metrics import mean_interval

#: results.csv's columns, in order.
COLUMNS = ("task", "model", "mode", "seed", "metric", "value", "accuracy", "f1", "mcc", "auroc",
           "value_without_leaked", "auroc_without_leaked", "test_rows", "test_rows_without_leaked", "steps")
#: leakage.csv's columns.
LEAKAGE_COLUMNS = ("task", "test_rows", "exact", "reverse_complement", "near", "leaked", "k", "cut", "conflicting")
#: references.csv's columns: ``value`` on our metric's scale, ``published`` as the source wrote it.
REFERENCE_COLUMNS = ("task", "reference", "metric", "value", "published", "source")
#: The line of each published reference in the figure, in the order they first appear.
_LINE_STYLES = ("--", ":", "-.", (0, (5, 1)), (0, (1, 3)))
_FLOATS = ("value", "accuracy", "f1", "mcc", "auroc", "value_without_leaked", "auroc_without_leaked")


def _cell(value) -> str:
    return f"{value:.6f}" if isinstance(value, float) else str(value)


def _csv(rows: list[dict], columns) -> str:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[_cell(row[c]) for c in columns] for row in rows])
    return text.getvalue()


def _read_csv(path: Path, columns, floats) -> list[dict]:
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
    except FileNotFoundError:
        raise InputError(path, "missing: not a finished benchmark directory") from None
    if tuple(reader.fieldnames or ()) != columns:
        raise InputError(path, f"columns are not {', '.join(columns)}", line=1)
    return [row | {k: float(row[k]) for k in floats} for row in rows]


def read_results(out: Path) -> list[dict]:
    """The rows of ``out/results.csv`` (metrics as floats)."""
    rows = _read_csv(out / "results.csv", COLUMNS, _FLOATS)
    if not rows:
        raise InputError(out / "results.csv", "no rows: not a finished benchmark directory")
    return rows


def _groups(rows: list[dict]) -> dict[tuple[str, str], dict[str, list[dict]]]:
    """(model, mode) -> task -> rows, in first-seen order."""
    groups: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["mode"]), {}).setdefault(row["task"], []).append(row)
    return groups


def _label(model: str, mode: str) -> str:
    return "k-mer baseline" if model == "k-mer" else f"{model} ({mode})"


def _format(mean: float, half: float) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.3f}" if math.isnan(half) else f"{mean:.3f} ± {half:.3f}"


def _versus(ours: tuple[float, float], published: float) -> str:
    """Our ``(mean, half-width)`` against a published number: the difference and whether it lies inside."""
    mean, half = ours
    if math.isnan(mean):
        return "n/a"
    inside = "" if math.isnan(half) else (", inside" if abs(published - mean) <= half else ", outside")
    return f"{_format(mean, half)} ({mean - published:+.3f}{inside})"


def references_markdown(rows: list[dict], references: list[dict], confidence: float) -> list[str]:
    """The lines of the summary's references section: one row per published number, our models beside it."""
    if not references:
        return []
    groups = _groups(rows)
    lines = ["## Published references", "",
             "Numbers others published on the same task (references.csv; not measured here) beside ours: "
             "mean ± half-width (ours - published; inside or outside our interval).", "",
             "| task (metric) | published by | value | source | " + " | ".join(_label(*g) for g in groups) + " |",
             "|---|---|---|---|" + "---|" * len(groups)]
    for ref in references:
        cells = [_versus(mean_interval([r["value"] for r in by_task.get(ref["task"], [])], confidence), ref["value"])
                 for by_task in groups.values()]
        lines.append(f"| {ref['task']} ({ref['metric']}) | {ref['reference']} | {ref['value']:.4f} | {ref['source']} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def summary_markdown(rows: list[dict], leakage: list[dict], confidence: float, references: list[dict] = ()) -> str:
    """Per task, every model and mode's headline metric and AUROC (the best mean in bold), the
    references and the leakage table."""
    groups = _groups(rows)
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    metric = {row["task"]: row["metric"] for row in rows}
    lines = ["# Benchmark summary", "",
             f"Mean ± half-width of the {confidence:.0%} Student's t interval over seeds (n - 1 degrees "
             "of freedom); the k-mer baseline is one deterministic fit. Best mean per task in bold.", ""]
    for key, title in (("value", "Headline metric"), ("auroc", "AUROC"),
                       ("value_without_leaked", "Headline metric without the leaked test rows")):
        names = [f"{t} ({'auroc' if key == 'auroc' else metric[t]})" for t in tasks]
        lines += [f"## {title}", "", "| model (mode) | seeds | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(tasks)]
        stats = {group: {t: mean_interval([r[key] for r in by_task.get(t, [])], confidence) for t in tasks}
                 for group, by_task in groups.items()}
        best = {t: max((s[t][0] for s in stats.values() if not math.isnan(s[t][0])), default=math.nan) for t in tasks}
        for group, by_task in groups.items():
            seeds = max(len(v) for v in by_task.values())
            cells = [f"**{_format(*s)}**" if s[0] == best[t] else _format(*s)
                     for t, s in stats[group].items()]
            lines.append(f"| {_label(*group)} | {seeds} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += references_markdown(rows, list(references), confidence)
    lines += ["## Leakage between train and test", "",
              "Test rows whose sequence is in the training split (exact), whose reverse complement is (RC), or "
              "that share a canonical k-mer Jaccard index >= cut with a training sequence (near); training rows "
              "whose sequence (or its reverse complement) is in training with other labels too (conflicting).", "",
              "| task | test rows | exact | RC | near | leaked | k | cut | conflicting train rows |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(str(entry[c]) for c in LEAKAGE_COLUMNS) + " |" for entry in leakage]
    return "\n".join(lines) + "\n"


def draw_figure(rows: list[dict], path: Path, confidence: float, references: list[dict] = ()) -> None:
    """Grouped bars per task, one per model (and mode), with the interval over seeds as error bars;
    each published reference a line across its task's bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(rows)
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    width = 0.8 / len(groups)
    figure, axes = plt.subplots(figsize=(max(5.0, 1.6 * len(tasks) * max(1, len(groups)) / 2), 3.6))
    for g, (group, by_task) in enumerate(groups.items()):
        stats = [mean_interval([r["value"] for r in by_task.get(t, [])], confidence) for t in tasks]
        axes.bar([i - 0.4 + width * (g + 0.5) for i in range(len(tasks))], [s[0] for s in stats], width,
                 yerr=[0 if math.isnan(s[1]) else s[1] for s in stats], capsize=3, label=_label(*group))
    names = list(dict.fromkeys(ref["reference"] for ref in references))
    for ref in references:
        style = _LINE_STYLES[names.index(ref["reference"]) % len(_LINE_STYLES)]
        first = ref is next(r for r in references if r["reference"] == ref["reference"])
        x = tasks.index(ref["task"])
        axes.hlines(ref["value"], x - 0.45, x + 0.45, colors="black", linestyles=style,
                    label=f"published: {ref['reference']}" if first else None)
    metric = {row["task"]: row["metric"] for row in rows}
    axes.set_xticks(range(len(tasks)), [f"{t}\n({metric[t]})" for t in tasks])
    axes.set_ylabel("test metric (mean over seeds)")
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    plt.close(figure)


def read_leakage(out: Path, tasks: list[str]) -> list[dict]:
    """The ``leakage.json`` of each task."""
    entries = []
    for task in tasks:
        path = out / "tasks" / task / "leakage.json"
        try:
            entries.append({"conflicting": "n/a"} | json.loads(path.read_text()))
        except FileNotFoundError:
            raise InputError(path, "missing: the benchmark did not finish this task's leakage check") from None
    return entries


def write_reports(out: Path, rows: list[dict], references: list[dict], confidence: float) -> None:
    """Every report, in ``out``."""
    atomic_write_text(out / "results.csv", _csv(rows, COLUMNS))
    atomic_write_text(out / "references.csv", _csv(references, REFERENCE_COLUMNS))
    leakage = read_leakage(out, list(dict.fromkeys(row["task"] for row in rows)))
    atomic_write_text(out / "leakage.csv", _csv(leakage, LEAKAGE_COLUMNS))
    atomic_write_text(out / "summary.md", summary_markdown(rows, leakage, confidence, references))
    draw_figure(rows, out / "figure.png", confidence, references)


def redraw(out: Path) -> None:
    """Rewrite ``summary.md`` and ``figure.png`` of a finished benchmark directory from its files
    (a directory without ``references.csv`` has no references)."""
    rows = read_results(out)
    pinned, references_csv = out / "suite.yaml", out / "references.csv"
    confidence = yaml.safe_load(pinned.read_text()).get("confidence", 0.95) if pinned.is_file() else 0.95
    leakage = read_leakage(out, list(dict.fromkeys(row["task"] for row in rows)))
    references = _read_csv(references_csv, REFERENCE_COLUMNS, ("value",)) if references_csv.is_file() else []
    atomic_write_text(out / "summary.md", summary_markdown(rows, leakage, confidence, references))
    draw_figure(rows, out / "figure.png", confidence, references)
