"""The prepared chromatin dataset: DeepSEA ``.mat`` files -> memory-mapped arrays + manifest.

``genolong chromatin prepare`` runs :func:`prepare_chromatin` once, so that training and
evaluation read fixed-width arrays instead of MATLAB files:

1. decode each of ``train.mat``, ``valid.mat``, ``test.mat`` present (:mod:`.deepsea`)
   chunk by chunk into memory-mapped arrays;
2. check how the forward / reverse-complement copies are arranged;
3. with a genome, locate every input by exact match on either strand
   (:mod:`.locate`) and cut the window of ``context`` bp centred on it, as BigBird did
   (App. F.3: 8,000 bp of GRCh37 around each 1,000-bp DeepSEA input);
4. write the final arrays and ``manifest.json``.

The work happens in a hidden sibling directory ``.<out>.partial`` whose progress file is
updated after every chunk: rerunning the same command after an interruption resumes
where it stopped. The directory is renamed to ``<out>`` only when complete.

A prepared directory holds, for each split present::

    manifest.json              inputs (sha256, size), options, counts, located fraction
    <split>.sequences.npy      (rows, context) uint8 ASCII over ACGTN
    <split>.labels.npy         (rows, 919) uint8 0/1 in DeepSEA column order
    <split>.loci.npy           (rows,) locate.LOCI_DTYPE records (only with a genome)

Rows whose input is not located exactly once (not found, ambiguous, too many N, too
repetitive) are either dropped (``unlocated="drop"``) or kept (``"keep"``, the default).
A kept row is stored in the centre of an N-padded row so the array stays rectangular,
and :meth:`genolong.datasets.chromatin.ChromatinSplit.sequence` returns only its original input: it keeps its
original length instead of being padded with thousands of N that the model never saw
in pre-training. Windows that run past a chromosome end are padded with N.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np

from genolong import __version__
from genolong.datasets.chromatin import FORMAT, LOCI_DTYPE, LocateStatus, Locations
from genolong.errors import ConfigError, InputError, UserError
from genolong.evaluation.profiles import N_PROFILES
from genolong.files import atomic_write_text, sha256_file
from genolong.outputs import mark_directory

from .deepsea import ONE_HOT_ORDER, SPLITS, DeepSEAMat, strand_pair_layout
from .locate import GenomeIndex, centred_flank

log = logging.getLogger(__name__)

#: BigBird's context for the chromatin task (App. F.3).
DEFAULT_CONTEXT = 8000
UNLOCATED_POLICIES = ("keep", "drop")


def prepare_chromatin(
    mat_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    genome: str | os.PathLike | None = None,
    context: int | None = None,
    unlocated: str = "keep",
    chunk_rows: int = 16384,
    probe_windows: int = 8,
    max_candidates: int = 20_000,
) -> dict:
    """Convert the DeepSEA ``.mat`` files of ``mat_dir`` into a prepared directory ``out``.

    Args:
        mat_dir: directory with any of ``train.mat``, ``valid.mat``, ``test.mat``.
        out: the prepared directory to create (must not exist).
        genome: FASTA of the genome the inputs come from (GRCh37/hg19 for DeepSEA); when
            given, rows are extended to ``context`` bp around their located input.
        context: window length with a genome (default 8,000).
        unlocated: ``"keep"`` or ``"drop"`` rows whose input is not located exactly once.
        chunk_rows: rows per chunk (the unit of progress and of memory use).
        probe_windows, max_candidates: see :meth:`GenomeIndex.locate`.

    Returns:
        The manifest (also written to ``out/manifest.json``).
    """
    mat_dir, out = Path(mat_dir), Path(out)
    if unlocated not in UNLOCATED_POLICIES:
        raise ConfigError(f"unlocated must be one of {UNLOCATED_POLICIES}, got {unlocated!r}")
    if genome is None and context is not None:
        raise ConfigError("a context length needs a genome to cut the windows from (give --genome)")
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be positive, got {chunk_rows}")
    if out.exists():
        raise UserError(f"{out} already exists; remove it or choose another output directory")
    if genome is not None and not Path(genome).is_file():
        raise InputError(genome, "no such genome FASTA file")
    mats: dict[str, DeepSEAMat] = {}
    try:
        for split, path in find_mat_files(mat_dir).items():
            mats[split] = DeepSEAMat(path, split)
        lengths = {mat.length for mat in mats.values()}
        if len(lengths) != 1:
            raise InputError(mat_dir, f"the .mat files hold sequences of different lengths {sorted(lengths)}")
        length = lengths.pop()
        if context is not None and (genome is None or context < 1):
            raise UserError(f"context={context} needs a genome and must be a positive number of bp", hint="pass "
                            "--genome with --context, or leave out --context")
        context = (DEFAULT_CONTEXT if context is None else context) if genome is not None else length
        centred_flank(context, length)
        options = {
            "context": context,
            "unlocated": unlocated if genome else None,
            "probe_windows": probe_windows,
            "max_candidates": max_candidates,
        }
        job = _Job(out, mats, Path(genome) if genome else None, options, chunk_rows)
        return job.run()
    finally:
        for mat in mats.values():
            mat.close()


def find_mat_files(mat_dir: Path) -> dict[str, Path]:
    """The ``{split}.mat`` files present in ``mat_dir``, in :data:`SPLITS` order."""
    if not mat_dir.is_dir():
        raise InputError(mat_dir, "no such directory (expected the DeepSEA train.mat, valid.mat, test.mat)")
    sources = {split: mat_dir / f"{split}.mat" for split in SPLITS if (mat_dir / f"{split}.mat").is_file()}
    if not sources:
        raise InputError(mat_dir, "no train.mat, valid.mat or test.mat found (unpack deepsea_train_bundle)")
    return sources


def _file_identity(path: Path) -> list:
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


def _open_array(path: Path, shape: tuple, dtype) -> np.memmap:
    """A writable memory-mapped ``.npy``: reopened when it exists (resume), created otherwise."""
    if path.exists():
        array = np.load(path, mmap_mode="r+")
        if array.shape == tuple(shape) and array.dtype == np.dtype(dtype):
            return array
    return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=tuple(shape))


class _Job:
    """One resumable preparation: the state in ``<work>/progress.json`` says what is done."""

    def __init__(
        self, out: Path, mats: dict[str, DeepSEAMat], genome: Path | None, options: dict, chunk_rows: int
    ):
        self.out, self.mats, self.genome, self.options, self.chunk_rows = (
            out,
            mats,
            genome,
            options,
            chunk_rows,
        )
        self.work = out.parent / f".{out.name}.partial"
        self.progress_path = self.work / "progress.json"
        self.fingerprint = {
            "options": options,
            "sources": {split: _file_identity(mat.path) for split, mat in mats.items()},
            "genome": _file_identity(genome) if genome else None,
        }
        self._index: GenomeIndex | None = None

    # -- progress ------------------------------------------------------------------------
    def _start_or_resume(self) -> None:
        if self.progress_path.exists():
            state = json.loads(self.progress_path.read_text())
            if state.get("fingerprint") == self.fingerprint:
                log.info("resuming the interrupted preparation in %s", self.work)
                self.state = state
                return
            log.info("discarding %s: it was started with other inputs or options", self.work)
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.state = {
            "fingerprint": self.fingerprint,
            "splits": {
                split: {
                    "decoded": 0,
                    "strand_pairs": None,
                    "located": 0,
                    "locate": None,
                    "written": 0,
                    "finished": False,
                }
                for split in self.mats
            },
        }
        self._save()

    def _save(self) -> None:
        atomic_write_text(self.progress_path, json.dumps(self.state, indent=1))

    def _path(self, split: str, name: str) -> Path:
        return self.work / f"{split}.{name}.npy"

    # -- stages --------------------------------------------------------------------------
    def run(self) -> dict:
        self._start_or_resume()
        for split, mat in self.mats.items():
            progress = self.state["splits"][split]
            self._hash_source(split, mat)
            self._decode(split, mat, progress)
            mat.close()  # frees a loaded v5 file before the next stage
            if progress["strand_pairs"] is None:
                progress["strand_pairs"] = strand_pair_layout(
                    np.load(self._path(split, "input"), mmap_mode="r"),
                    np.load(self._path(split, "all_labels"), mmap_mode="r"),
                )
                self._save()
            if self.genome is not None:
                self._locate(split, mat.rows, progress)
                if progress.get("locate") is None:
                    progress["locate"] = self._locate_summary(split, progress["strand_pairs"]["layout"])
                    self._save()
            self._write(split, mat.rows, progress)
        manifest = self._manifest()
        atomic_write_text(self.work / "manifest.json", json.dumps(manifest, indent=1) + "\n")
        self.progress_path.unlink()
        mark_directory(self.work, "chromatin-data")
        self.work.rename(self.out)
        return manifest

    def _hash_source(self, split: str, mat: DeepSEAMat) -> None:
        sources = self.state.setdefault("sources", {})
        if split not in sources:
            log.info("%s: sha256 of %s", split, mat.path)
            sources[split] = {
                "path": str(mat.path),
                "size": mat.path.stat().st_size,
                "sha256": sha256_file(mat.path),
                "format": mat.format,
            }
            self._save()

    def _decode(self, split: str, mat: DeepSEAMat, progress: dict) -> None:
        if progress["decoded"] >= mat.rows:
            return
        sequences = _open_array(self._path(split, "input"), (mat.rows, mat.length), np.uint8)
        labels = _open_array(self._path(split, "all_labels"), (mat.rows, N_PROFILES), np.uint8)
        started = time.perf_counter()
        for begin, chunk_sequences, chunk_labels in mat.chunks(self.chunk_rows, start=progress["decoded"]):
            end = begin + len(chunk_sequences)
            sequences[begin:end] = chunk_sequences
            labels[begin:end] = chunk_labels
            sequences.flush()
            labels.flush()
            progress["decoded"] = end
            self._save()
            log.info(
                "%s: decoded %d / %d rows (%.0f rows/s)",
                split,
                end,
                mat.rows,
                end / max(time.perf_counter() - started, 1e-9),
            )

    def _genome_index(self) -> GenomeIndex:
        if self._index is None:
            log.info("indexing %s", self.genome)
            self._index = GenomeIndex.from_fasta(self.genome)
            if "genome" not in self.state:
                self.state["genome"] = {
                    "path": str(self.genome),
                    "size": self.genome.stat().st_size,
                    "sha256": sha256_file(self.genome),
                    "chromosomes": self._index.names,
                    "total_bp": self._index.total_bp,
                }
                self._save()
        return self._index

    def _locate(self, split: str, rows: int, progress: dict) -> None:
        if progress["located"] >= rows:
            return
        index = self._genome_index()
        queries = np.load(self._path(split, "input"), mmap_mode="r")
        loci = _open_array(self._path(split, "all_loci"), (rows,), LOCI_DTYPE)
        started, first = time.perf_counter(), progress["located"]
        for begin in range(progress["located"], rows, self.chunk_rows):
            end = min(begin + self.chunk_rows, rows)
            found = index.locate(
                queries[begin:end],
                probe_windows=self.options["probe_windows"],
                max_candidates=self.options["max_candidates"],
            )
            loci[begin:end] = found.to_records()
            loci.flush()
            progress["located"] = end
            self._save()
            log.info(
                "%s: located %d / %d rows (%.0f rows/s)",
                split,
                end,
                rows,
                (end - first) / max(time.perf_counter() - started, 1e-9),
            )

    def _write(self, split: str, rows: int, progress: dict) -> None:
        """Final arrays of ``split``: sequences (windows with a genome), labels, loci."""
        if progress["finished"]:
            return
        final = {name: self.work / f"{split}.{name}.npy" for name in ("sequences", "labels", "loci")}
        if self.genome is None:
            self._path(split, "input").replace(final["sequences"])
            self._path(split, "all_labels").replace(final["labels"])
        else:
            self._write_windows(split, rows, progress, final)
        progress["finished"] = True
        self._save()

    def _write_windows(self, split: str, rows: int, progress: dict, final: dict[str, Path]) -> None:
        index, context = self._genome_index(), self.options["context"]
        inputs = np.load(self._path(split, "input"), mmap_mode="r")
        all_loci = np.load(self._path(split, "all_loci"), mmap_mode="r")
        drop = self.options["unlocated"] == "drop"
        kept = all_loci["status"] == LocateStatus.LOCATED if drop else np.ones(rows, bool)
        destination = np.concatenate([[0], np.cumsum(kept)])  # output row of each input row
        kept_rows = int(destination[-1])
        windows = _open_array(final["sequences"], (kept_rows, context), np.uint8)
        if drop:
            all_labels = np.load(self._path(split, "all_labels"), mmap_mode="r")
            labels = _open_array(final["labels"], (kept_rows, N_PROFILES), np.uint8)
            loci = _open_array(final["loci"], (kept_rows,), LOCI_DTYPE)
        for begin in range(progress["written"], rows, self.chunk_rows):
            end = min(begin + self.chunk_rows, rows)
            chosen = begin + np.flatnonzero(kept[begin:end])
            target = slice(destination[begin], destination[end])
            windows[target] = index.cut_windows(
                Locations.from_records(all_loci[chosen]), inputs[chosen], context
            )
            windows.flush()
            if drop:
                labels[target] = all_labels[chosen]
                loci[target] = all_loci[chosen]
                labels.flush()
                loci.flush()
            progress["written"] = end
            self._save()
            log.info("%s: wrote %d-bp windows for %d / %d rows", split, context, end, rows)
        del inputs, all_loci
        if drop:
            for name in ("all_labels", "all_loci"):
                self._path(split, name).unlink(missing_ok=True)
        else:
            for name, final_name in (("all_labels", "labels"), ("all_loci", "loci")):
                if self._path(split, name).exists():
                    self._path(split, name).replace(final[final_name])
        self._path(split, "input").unlink(missing_ok=True)

    # -- manifest ------------------------------------------------------------------------
    def _manifest(self) -> dict:
        manifest = {
            "format": FORMAT,
            "genolong_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "n_profiles": N_PROFILES,
            "one_hot_order": ONE_HOT_ORDER,
            "sequence_encoding": "uint8 ASCII over ACGTN",
            "input_length": next(iter(self.mats.values())).length,
            "context": self.options["context"],
            "unlocated": self.options["unlocated"],
            "genome": self.state.get("genome"),
            "locate": None
            if self.genome is None
            else {
                "method": "exact match on either strand; canonical 32-mer index of 32-bp genome blocks",
                "probe_windows": self.options["probe_windows"],
                "max_candidates": self.options["max_candidates"],
            },
            "splits": {},
        }
        for split, mat in self.mats.items():
            labels = np.load(self.work / f"{split}.labels.npy", mmap_mode="r")
            entry = {
                "source": self.state["sources"][split],
                "rows_in": mat.rows,
                "rows": len(labels),
                "positive_labels": int(
                    sum(labels[i : i + 65536].sum(dtype=np.int64) for i in range(0, len(labels), 65536))
                ),
                "strand_pairs": self.state["splits"][split]["strand_pairs"],
                "files": {name: f"{split}.{name}.npy" for name in ("sequences", "labels")},
            }
            if self.genome is not None:
                entry["files"]["loci"] = f"{split}.loci.npy"
                entry["locate"] = self.state["splits"][split]["locate"]
            manifest["splits"][split] = entry
        return manifest

    def _locate_summary(self, split: str, layout: str) -> dict:
        """Counts per locate status; with a ``halves`` layout, the plus-strand share of each half."""
        loci = np.load(self._path(split, "all_loci"), mmap_mode="r")
        rows = len(loci)
        summary = Locations.from_records(loci).counts()
        summary["located_fraction"] = summary["located"] / rows if rows else 0.0
        if layout == "halves":
            located = loci["status"] == LocateStatus.LOCATED
            plus = loci["strand"] > 0
            halves = {"first_half": slice(0, rows // 2), "second_half": slice(rows // 2, rows)}
            summary["plus_strand_fraction"] = {
                name: float(plus[part][located[part]].mean()) if located[part].any() else None
                for name, part in halves.items()
            }
        log.info(
            "%s: located %d of %d rows (%.2f%%); %s",
            split,
            summary["located"],
            rows,
            100 * summary["located_fraction"],
            summary,
        )
        return summary
