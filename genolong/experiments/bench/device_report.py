"""The markdown report of ``genolong bench gpu`` (:mod:`genolong.experiments.bench.device_check`)."""

from __future__ import annotations

from genolong.experiments.bench.device_speed import MODELS, PUBLISHED, PUBLISHED_RATIOS, speed_table


def markdown(results: dict) -> str:
    """The whole report: machine and command, then one part per section that ran."""
    machine = results["machine"]
    device = (f"{machine['gpu']}, {machine['gpu_memory_gib']} GiB, CUDA {machine['cuda']}" if "gpu" in machine
              else "CPU only (--cpu: tiny sizes, the logic of the check)")
    lines = [f"# Device check, {results['date']}", "", f"- device: {device}",
             f"- software: Python {machine['python']}, torch {machine['torch']}, transformers {machine['transformers']}",
             f"- command: `{results['command']}`", ""]
    for name, section in results["sections"].items():
        rows = section["rows"]
        failed = sum(row.get("ok") is False for row in rows)
        verdict = "measurements" if name in ("speed", "published") else ("passed" if not failed else f"{failed} FAILED")
        lines += [f"## {name} ({verdict}, {section['seconds']:.0f} s)", ""]
        lines += PARTS.get(name, _generic)(rows) + [""]
    return "\n".join(lines)


def _generic(rows: list[dict]) -> list[str]:
    keys = list(dict.fromkeys(key for row in rows for key in row if key != "check"))
    table = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    values = ([row.get(key, "") for key in keys] for row in rows)
    return table + ["| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |"
                    for row in values]


def _kernels(rows: list[dict]) -> list[str]:
    table = ["| backbone | tokens | dtype | path | rows checked | max error, outputs | max error, gradients "
             "(relative) | tolerance | result | first fwd+bwd (compile included) | peak memory |", "|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for row in rows:
        if "out_error" not in row:
            where = " | ".join(str(row.get(key, "")) for key in ("backbone", "tokens", "dtype"))
            table.append(f"| {where} | | | | | | {row.get('status')} | | |")
            continue
        peak = "" if row["peak_gb"] is None else f"{row['peak_gb']:.2f} GiB"
        table.append(f"| {row['backbone']} | {row['tokens']:,} | {row['dtype']} | {row['path']} | {row['rows']} | "
                     f"{row['out_error']:.1e} | {row['grad_error']:.1e} | {row['tolerance']:.0e} | "
                     f"{'ok' if row['ok'] else 'FAIL'} | {row['seconds'] * 1e3:.0f} ms | {peak} |")
    return table


def _tables(rows: list[dict], legend: dict[str, str], **ratios) -> list[str]:
    """The legend of the models, then a time table per phase (:func:`speed_table`)."""
    parts = ["Batch 1; median of the timed calls; peak = allocated GPU memory.", "",
             *(f"- `{name}`: {what}" for name, what in legend.items()), ""]
    for phase, title in (("forward", "Forward (no grad)"), ("train", "Training step (MLM, AdamW)")):
        parts += [f"**{title}**", "", speed_table(rows, phase, **ratios), ""]
    return parts


def _speed(rows: list[dict]) -> list[str]:
    parts = _tables(rows, MODELS)
    ours = [row for row in rows if row["model"] == "genolong-bigbird" and row["phase"] == "train" and row["status"] == "ok"]
    if ours:
        parts.append("Training tokens/s of ours (batch 1): " + ", ".join(
            f"{row['tokens']:,}: {row['tokens_per_s']:,.0f}" for row in ours))
    return parts


PARTS = {"kernels": _kernels, "speed": _speed,
         "published": lambda rows: _tables(rows, PUBLISHED, ratios=PUBLISHED_RATIOS)}
