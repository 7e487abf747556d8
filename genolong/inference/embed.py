"""``genolong embed``: the records of a file embedded by :class:`~genolong.classifier.embedder.Embedder`
(layers, pooling, per-base vectors and strand averaging are described there), streamed to HDF5."""

from __future__ import annotations

import csv
import io
import itertools
from pathlib import Path

import h5py

from genolong.classifier.embedder import Embedder
from genolong.core.errors import InputError
from genolong.core.files import atomic_path
from genolong.core.progress import progress_bar
from genolong.dna.sequence import InvalidSequenceError, clean, open_text_or_gzip, read_fasta


def read_sequences(path: Path):
    """(id, sequence) of each record of a FASTA file (plain or compressed) or of a CSV/TSV table with a
    ``sequence`` column and an optional ``id`` column (default: the 1-based row number). A table without
    ``sequence``, or a sequence outside the IUPAC codes, raises :class:`InputError`."""
    path = Path(path)
    if path.name.removesuffix(".gz").endswith((".csv", ".tsv")):
        with open_text_or_gzip(path) as binary, io.TextIOWrapper(binary, encoding="utf-8", newline="") as handle:
            rows = csv.DictReader(handle, delimiter="\t" if ".tsv" in path.name else ",")
            if "sequence" not in (rows.fieldnames or []):
                raise InputError(path, "no 'sequence' column in the header", line=1)
            for number, row in enumerate(rows, start=1):
                name = row.get("id") or str(number)
                try:
                    clean(row["sequence"] or "")
                except InvalidSequenceError as err:
                    raise InputError(path, err.message, line=number + 1, record=name) from None
                if not row["sequence"]:
                    raise InputError(path, "empty sequence", line=number + 1, record=name)
                yield name, row["sequence"]
    else:
        for record in read_fasta(path):
            yield record.name, record.sequence


def write_embeddings(embedder: Embedder, records, out: Path, *, batch_size: int = 32, per_base: bool = False,
                     both_strands: bool = False, source: Path | None = None) -> int:
    """Embed ``records`` ((id, sequence) pairs) batch by batch into the HDF5 file ``out`` (written atomically;
    memory holds one batch; errors name ``source``); returns the number of records. The file holds ``ids``
    (N,) strings and, pooled, ``embeddings`` (N, n_layers, H) float32, or per base a group ``per_base`` of
    one (n_layers, L_i, H) float32 dataset per record, named by its 0-based position (attribute ``id``),
    and the attributes ``layers``, ``pooling``, ``both_strands``, ``per_base``."""
    hidden = embedder.model.config.hidden_size
    count = 0
    with atomic_path(out) as tmp, h5py.File(tmp, "w") as handle:
        handle.attrs.update(layers=list(embedder.layers), pooling=embedder.pooling, both_strands=both_strands,
                            per_base=per_base)
        ids = handle.create_dataset("ids", shape=(0,), maxshape=(None,), dtype=h5py.string_dtype())
        if per_base:
            group = handle.create_group("per_base")
        else:
            vectors = handle.create_dataset("embeddings", shape=(0, len(embedder.layers), hidden),
                                            maxshape=(None, len(embedder.layers), hidden), dtype="float32",
                                            chunks=(max(1, batch_size), len(embedder.layers), hidden))
        records = iter(records)
        with progress_bar(unit="seq", desc="embed") as bar:
            while batch := list(itertools.islice(records, batch_size)):
                names = [name for name, _ in batch]
                result = embedder.embed([s for _, s in batch], names=names, per_base=per_base,
                                        both_strands=both_strands, source=source)
                ids.resize((count + len(batch),))
                ids[count:] = names
                if per_base:
                    for offset, (name, array) in enumerate(zip(names, result, strict=True)):
                        group.create_dataset(str(count + offset), data=array).attrs["id"] = name
                else:
                    vectors.resize((count + len(batch), *vectors.shape[1:]))
                    vectors[count:] = result
                count += len(batch)
                bar.update(len(batch))
    return count
