"""Reports of the attention benchmark from the rows of :func:`genolong.experiments.bench.runner.run_spec`
(one per model, length and phase): CSV, markdown tables, a log-log plot."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from genolong.core.files import atomic_path, atomic_write_text
from genolong.experiments.bench.attention import FLOOR, LEGACY_PEERS, PEERS, PHASES

#: The lengths the summary compares (4K and 16K tokens); it falls back to the shortest and longest measured.
REFERENCE_LENGTHS = (4096, 16384)
#: The CSV columns.
COLUMNS = ["model", "length", "dtype", "threads", "phase", "status", "time_s", "time_median_s", "cpu_s",
           "runs", "first_call_s", "peak_mb", "resident_mb", "attention_share", "load1", "notes"]


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as CSV (atomically), with ``attention_share`` filled in."""
    add_attention_share(rows)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows({key: _csv_value(row.get(key)) for key in COLUMNS} for row in rows)
    atomic_write_text(path, buffer.getvalue())


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as handle:
        return [{key: _parse(key, value) for key, value in row.items()} for row in csv.DictReader(handle)]


def add_attention_share(rows: list[dict[str, Any]]) -> None:
    """``attention_share`` = time / floor time - 1, for our models (not the floor, not peers)."""
    floor = {(row["phase"], row["length"], row["dtype"]): row["time_s"]
             for row in rows if row["model"] == FLOOR and row.get("status") == "ok"}
    for row in rows:
        key = (row["phase"], row["length"], row["dtype"])
        ours = row["model"] not in PEERS + LEGACY_PEERS and row["model"] != FLOOR
        ok = ours and row.get("status") == "ok" and key in floor
        row["attention_share"] = row["time_s"] / floor[key] - 1 if ok else None


def _csv_value(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else ("" if value is None else value)


def _parse(key: str, value: str) -> Any:
    if value == "":
        return None
    if key in {"length", "threads", "runs"}:
        return int(value)
    if key in {"model", "dtype", "phase", "status", "notes"}:
        return value
    return float(value)


def _models(rows: Iterable[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(row["model"] for row in rows))


def _lengths(rows: Iterable[dict[str, Any]]) -> list[int]:
    return sorted({row["length"] for row in rows})


def _cell(row: dict[str, Any] | None, key: str) -> str:
    if row is None:
        return ""
    if row.get("status") != "ok":
        return str(row.get("status") or "").split(":")[0]  # "killed" / "failed" / "skipped"
    value = row.get(key)
    if value is None:
        return ""
    return f"{value:,.0f}" if key == "peak_mb" else f"{value:.3g}"


def _index(rows: list[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, Any]]:
    return {(row["model"], row["length"], row["phase"]): row for row in rows}


def metric_table(rows: list[dict[str, Any]], phase: str, key: str) -> str:
    """Markdown table of one metric: a row per model, a column per length."""
    index, lengths = _index(rows), _lengths(rows)
    lines = ["| model | " + " | ".join(f"{n:,}" for n in lengths) + " |", "|---" * (len(lengths) + 1) + "|"]
    for model in _models(rows):
        cells = [_cell(index.get((model, n, phase)), key) for n in lengths]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def slope(rows_by_length: dict[int, dict[str, Any]], short: int, long: int) -> float | None:
    """Log-log slope of time between two lengths (1 = linear, 2 = quadratic)."""
    a, b = rows_by_length.get(short), rows_by_length.get(long)
    if short == long or not (a and b and a.get("status") == b.get("status") == "ok"):
        return None
    return math.log(b["time_s"] / a["time_s"]) / math.log(long / short)


def summary_table(rows: list[dict[str, Any]]) -> str:
    """The headline numbers: times, slope, attention share and memory at :data:`REFERENCE_LENGTHS`."""
    lengths = _lengths(rows)
    short, long = REFERENCE_LENGTHS if set(REFERENCE_LENGTHS) <= set(lengths) else (lengths[0], lengths[-1])
    index = _index(rows)

    def forward(model, n, phase="forward"):
        return index.get((model, n, phase))

    def fitted_slope(model):
        value = slope({n: forward(model, n) for n in (short, long)}, short, long)
        return "" if value is None else f"{value:.2f}"

    # title -> cell(model); a dict, so one length measured gives each column once
    columns = {f"forward {_tokens(n)} (s)": lambda m, n=n: _cell(forward(m, n), "time_s") for n in (short, long)}
    if short != long:
        columns[f"slope {_tokens(short)}-{_tokens(long)}"] = fitted_slope
    columns |= {f"attention share {_tokens(n)}": lambda m, n=n: _share(forward(m, n)) for n in (short, long)}
    columns |= {f"train step {_tokens(n)} (s)": lambda m, n=n: _cell(forward(m, n, "train"), "time_s")
                for n in (short, long)}
    columns[f"forward peak {_tokens(long)} (MB)"] = lambda m: _cell(forward(m, long), "peak_mb")
    columns[f"train peak {_tokens(long)} (MB)"] = lambda m: _cell(forward(m, long, "train"), "peak_mb")

    lines = ["| model | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for model in _models(rows):
        lines.append(f"| {model} | " + " | ".join(cell(model) for cell in columns.values()) + " |")
    return "\n".join(lines)


def _share(row: dict[str, Any] | None) -> str:
    share = (row or {}).get("attention_share")
    return "" if share is None else f"{share:+.0%}"


def _tokens(length: int) -> str:
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


def markdown_report(rows: list[dict[str, Any]]) -> str:
    """Summary plus one table per phase and metric."""
    parts = ["### Summary", summary_table(rows)]
    for phase in PHASES:
        if any(row["phase"] == phase for row in rows):
            for title, key in (("best time (s)", "time_s"),
                               ("process CPU time of the best call (s)", "cpu_s"),
                               ("peak memory above resident (MB)", "peak_mb")):
                parts += [f"### {phase}: {title}", metric_table(rows, phase, key)]
    return "\n\n".join(parts) + "\n"


def plot(path: Path, rows: list[dict[str, Any]], title: str) -> None:
    """Log-log time and memory vs length, a panel per phase and metric, a line per model."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    panels = [(phase, key) for phase in PHASES for key in ("time_s", "peak_mb")]
    figure, axes = plt.subplots(2, 2, figsize=(12, 9))
    for axis, (phase, key) in zip(axes.flat, panels, strict=True):
        axis.set_prop_cycle(color=plt.cm.tab20.colors)  # a color per model, the same in every panel
        for model in _models(rows):
            points = sorted((row["length"], row[key]) for row in rows if row["model"] == model
                            and row["phase"] == phase and row.get("status") == "ok" and row.get(key))
            if points:
                style = "--" if model in PEERS + LEGACY_PEERS else (":" if model == FLOOR else "-")
                axis.plot(*zip(*points, strict=True), style, marker="o", label=model)
        axis.set_xscale("log", base=2)
        axis.set(yscale="log", xlabel="sequence length (tokens)",
                 ylabel="best time (s)" if key == "time_s" else "peak memory above resident (MB)",
                 title=f"{phase}: {'time' if key == 'time_s' else 'memory'}")
        axis.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=110)
    plt.close(figure)
