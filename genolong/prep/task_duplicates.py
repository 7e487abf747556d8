"""Copies among the labelled rows of a task (``genolong task prepare --duplicates keep|drop|error``).

Two rows of a given split (or of all rows, when the split is drawn afterwards) are copies when their
sequences are the same (case aside) or reverse complements (:func:`genolong.evaluation.leakage.copy_kind`;
across given splits, copies are leakage). A group of copies with the same labels has *repeated* rows
(all but the first); one whose labels differ is all *conflicting* rows, as nothing says which label
is right. ``drop`` (the default) removes both, ``keep`` keeps them, ``error`` stops at the first copy
naming its file and row; the counts per split go into the manifest.
"""

from __future__ import annotations

import numpy as np

from genolong.core.errors import ConfigError, InputError
from genolong.datasets.task import DUPLICATE_RULES
from genolong.datasets.task_inputs import Row
from genolong.evaluation.leakage import copy_key

#: The manifest's name of the rows compared together when the split is drawn after this step.
ALL_ROWS = "all"


def resolve_duplicates(rows: list[Row], values: np.ndarray, rule: str = "drop") -> tuple[np.ndarray, dict]:
    """The sorted indices of the N ``rows`` (targets ``values`` ``(N, K)``) kept by ``rule`` (one of
    :data:`DUPLICATE_RULES`) and the manifest's ``duplicates`` entry; an InputError for a copy under
    ``error``."""
    if rule not in DUPLICATE_RULES:
        raise ConfigError(f"--duplicates must be one of {', '.join(DUPLICATE_RULES)}, got {rule!r}")
    groups: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault((row.split or ALL_ROWS, copy_key(row.sequence)), []).append(i)
    counts: dict[str, dict[str, int]] = {}
    dropped: set[int] = set()
    for (split, _), members in groups.items():
        found = counts.setdefault(split, {"repeated": 0, "conflicting": 0, "reverse_complement": 0})
        if len(members) == 1:
            continue
        first = rows[members[0]]
        conflicting = any(not np.array_equal(values[i], values[members[0]]) for i in members)
        if rule == "error":
            _refuse(first, rows[members[1]], conflicting)
        copies = members if conflicting else members[1:]
        found["conflicting" if conflicting else "repeated"] += len(copies)
        found["reverse_complement"] += sum(rows[i].sequence.upper() != first.sequence.upper() for i in members[1:])
        if rule == "drop":
            dropped.update(copies)
    kept = np.array([i for i in range(len(rows)) if i not in dropped], dtype=np.int64)
    return kept, {"rule": rule, "splits": counts, "line": _line(rule, counts)}


def _refuse(first: Row, copy: Row, conflicting: bool) -> None:
    what = "with other labels" if conflicting else "with the same labels"
    kind = "its reverse complement" if copy.sequence.upper() != first.sequence.upper() else "its sequence"
    raise InputError(copy.where[0], f"{kind} is that of {first.where[0]}:{first.where[1]} ({first.id!r}), "
                     f"{what}", line=copy.where[1],
                     hint="remove the copies, or let --duplicates drop (or keep) them")


def _line(rule: str, counts: dict[str, dict[str, int]]) -> str:
    """One line: the repeats and conflicting rows per split, and what was done with them."""
    total = sum(c["repeated"] + c["conflicting"] for c in counts.values())
    parts = [f"{split}: {c['repeated']} repeated, {c['conflicting']} with conflicting labels"
             + (f" ({c['reverse_complement']} as reverse complement)" if c["reverse_complement"] else "")
             for split, c in counts.items()]
    action = {"drop": "dropped", "keep": "kept", "error": "none found"}[rule]
    return f"{total} rows copy another row of their split ({'; '.join(parts)}): {action} (--duplicates {rule})"
