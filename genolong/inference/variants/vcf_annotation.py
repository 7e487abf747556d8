"""The input VCF annotated with each allele's top effects in INFO (``score-variants --annotate-vcf``).

While scoring, every chunk writes an annotation part, ``line, alt, PROFILE:VALUE&PROFILE:VALUE...`` per
scored allele (the ``top_k`` outputs by the absolute rank score); at the end the input VCF is streamed
once and each record gets ``GENOLONG=ALT:PROFILE:VALUE&...,ALT:...`` for its scored alleles.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import cyvcf2
import numpy as np

from genolong.core.files import atomic_path
from genolong.inference.variants.reader import VariantFile
from genolong.inference.variants.scoring import rank_score
from genolong.inference.variants.windows import VariantWindows

INFO_ID = "GENOLONG"


def annotation_rows(windows: list[VariantWindows], scores: dict[str, np.ndarray], labels: list[str],
                    top_k: int) -> list[str]:
    """``line\\talt\\tentries\\n`` per scored allele: its ``top_k`` outputs by absolute rank score."""
    rank = scores[rank_score(scores)]
    safe = [re.sub(r"[\s;=,]", "_", label) for label in labels]  # no whitespace, ";", "=", "," in INFO
    rows = []
    for row, window in enumerate(windows):
        best = np.argsort(-np.abs(rank[row]), kind="stable")[:top_k]
        entries = "&".join(f"{safe[i]}:{rank[row, i]:.4g}" for i in best)  # names hold "|"
        rows.append(f"{window.variant.line}\t{window.variant.alt}\t{entries}\n")
    return rows


def _annotations(parts: list[Path]) -> Iterator[tuple[int, str]]:
    """``(line, ALT:entries)`` from the annotation parts, in input order."""
    for part in parts:
        with open(part) as handle:
            for text in handle:
                line, alt, entries = text.rstrip("\n").split("\t")
                yield int(line), f"{alt}:{entries}"


def annotate_vcf(variants: VariantFile, parts: list[Path], out: Path, rank_name: str) -> None:
    """Write ``variants`` (a VCF) to ``out`` (``.gz``: bgzip) with the ``GENOLONG`` INFO field."""
    reader = cyvcf2.VCF(str(variants.path))
    reader.add_info_to_header({
        "ID": INFO_ID, "Number": ".", "Type": "String",
        "Description": f"genolong score-variants: ALT:PROFILE:{rank_name}&... top effects by |{rank_name}|"})
    pending = _annotations(parts)
    upcoming = next(pending, None)
    with atomic_path(out) as tmp, contextlib.closing(reader):
        writer = cyvcf2.Writer(str(tmp), reader, mode="wz" if out.name.endswith(".gz") else "w")
        for line, record in enumerate(reader, start=(variants.header_lines or 0) + 1):
            values = []
            while upcoming is not None and upcoming[0] == line:
                values.append(upcoming[1])
                upcoming = next(pending, None)
            if values:
                record.INFO[INFO_ID] = ",".join(values)
            writer.write_record(record)
        writer.close()
