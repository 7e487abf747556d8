"""Choose model outputs by name: ``--profiles`` of ``score-variants`` and ``explain``."""

from __future__ import annotations

from genolong.core.errors import UserError
from genolong.evaluation.profiles import CLASS_COLUMNS, N_PROFILES, profile_class


def select_labels(label_names: list[str], queries: list[str] | None) -> list[int]:
    """Indices of the outputs matching any query (all without queries), in column order: an output's full
    name, a DeepSEA class (``DHS``, ``TF``, ``HM``; 919-output models only) or one part of a
    ``Cell|Assay|Treatment`` name, any case. A query that matches nothing raises :class:`UserError`."""
    if not queries:
        return list(range(len(label_names)))
    chosen: set[int] = set()
    for query in queries:
        if query in CLASS_COLUMNS and len(label_names) == N_PROFILES:
            matches = set(CLASS_COLUMNS[query])
        else:
            wanted = query.lower()
            matches = {i for i, name in enumerate(label_names) if name == query or wanted in (
                part.lower() for part in name.split("|"))}
        if not matches:
            raise UserError(
                f"--profiles {query!r} matches no output of the model (e.g. {', '.join(label_names[:3])}; "
                "or a class DHS, TF, HM)")
        chosen |= matches
    return sorted(chosen)


def label_class(label_names: list[str], index: int) -> str:
    """``DHS``/``TF``/``HM`` for a 919-profile model, else the output's name."""
    return profile_class(index) if len(label_names) == N_PROFILES else label_names[index]
