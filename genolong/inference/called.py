"""How much of a sequence a classifier called, and a caution when that is much of a species it never saw.

``genolong scan`` and ``predict-promoter`` end with the bp of the called regions (the ``--bed`` regions)
over the bp scored. A model whose inference spec sets ``called_fraction_caution`` (the promoter task's)
and whose card lists ``species`` gets one more line when it calls over :data:`CAUTION_FRACTION` of a
species outside them (``--species`` names the user's).
"""

from __future__ import annotations

from genolong.classifier.task_info import TaskInfo

#: Above this called fraction a promoter model on a species it never saw gets a caution: promoters
#: (a few hundred bp around each transcription start) cover a few percent of a genome.
CAUTION_FRACTION = 0.05


def _normalised(name: str) -> str:
    return " ".join(name.replace("_", " ").lower().split())


def knows_species(info: TaskInfo, species: str | None) -> bool:
    """Whether ``species`` (scientific or common name, any case, ``_`` for space; None: not named) is one
    the model's card records."""
    known = {_normalised(name) for pair in info.species.items() for name in pair}
    return species is not None and _normalised(species) in known


def called_line(called_bp: int, scored_bp: int, threshold: float, which: str) -> str:
    """``called 1.2% of the 230,208 bp scored (2,750 bp) at the scan threshold 0.9312``."""
    fraction = called_bp / scored_bp if scored_bp else 0.0
    return f"called {fraction:.1%} of the {scored_bp:,} bp scored ({called_bp:,} bp) at the {which} {threshold:.4g}"


def caution_line(info: TaskInfo, species: str | None, called_bp: int, scored_bp: int) -> str | None:
    """The caution line (module docstring) when ``called_bp`` is over :data:`CAUTION_FRACTION` of
    ``scored_bp`` on a species outside the card's (or not named); else None."""
    if info.inference is None or not info.inference.called_fraction_caution or not info.species or knows_species(info, species) or not scored_bp:
        return None
    fraction = called_bp / scored_bp
    if fraction <= CAUTION_FRACTION:
        return None
    seen = ", ".join(f"{common} ({scientific})" for scientific, common in info.species.items())
    whose = f"{species} DNA" if species else "this DNA (name its species with --species)"
    return (f"caution: this model was trained and validated on {seen} only, never on {whose}, and called "
            f"{fraction:.0%} of it (over {CAUTION_FRACTION:.0%}), where promoters cover a few percent of a genome: "
            "most of these calls are background. Fine-tune it on your genome with "
            "background windows (genolong promoter prepare --tss TSS.bed --genome GENOME --negatives genomic "
            "--out DATA, then genolong promoter finetune --data DATA --out RUN)")
