"""The resumable work of ``genolong chromatin prepare`` (:func:`genolong.prep.chromatin_dataset.prepare_chromatin`).

A :class:`ChromatinJob` works in the hidden ``.<out>.partial``, renamed to ``<out>`` when complete,
saving ``progress.json`` after every chunk so that rerunning the command resumes.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import numpy as np

from genolong import __version__
from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text, mark_directory, sha256_file, work_path
from genolong.datasets.chromatin import FORMAT, LOCI_DTYPE, LocateStatus, Locations
from genolong.evaluation.profiles import N_PROFILES

from .deepsea import ONE_HOT_ORDER, DeepSEAMat, strand_pair_layout
from .locate import GenomeIndex

log = logging.getLogger(__name__)


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


class ChromatinJob:
    """One resumable preparation: the state in ``<work>/progress.json`` says what is done."""

    def __init__(self, out: Path, mats: dict[str, DeepSEAMat], genome: Path | None, options: dict,
                 chunk_rows: int):
        self.out, self.mats, self.genome = out, mats, genome
        self.options, self.chunk_rows = options, chunk_rows
        self.work = work_path(out, "partial")
        self.progress_path = self.work / "progress.json"
        self.fingerprint = {"options": options,
                            "sources": {split: _file_identity(mat.path) for split, mat in mats.items()},
                            "genome": _file_identity(genome) if genome else None}
        self._index: GenomeIndex | None = None

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
        fresh = {"decoded": 0, "strand_pairs": None, "located": 0, "locate": None, "written": 0,
                 "finished": False}
        self.state = {"fingerprint": self.fingerprint, "splits": {split: dict(fresh) for split in self.mats}}
        self._save()

    def _save(self) -> None:
        atomic_write_text(self.progress_path, json.dumps(self.state, indent=1))

    def _path(self, split: str, name: str) -> Path:
        return self.work / f"{split}.{name}.npy"

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
                    np.load(self._path(split, "all_labels"), mmap_mode="r"))
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
            sources[split] = {"path": str(mat.path), "size": mat.path.stat().st_size,
                              "sha256": sha256_file(mat.path), "format": mat.format}
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
            log.info("%s: decoded %d / %d rows (%.0f rows/s)", split, end, mat.rows,
                     end / max(time.perf_counter() - started, 1e-9))

    def _genome_index(self) -> GenomeIndex:
        if self._index is None:
            log.info("indexing %s", self.genome)
            self._index = GenomeIndex.from_fasta(self.genome)
            if "genome" not in self.state:
                self.state["genome"] = {"path": str(self.genome), "size": self.genome.stat().st_size,
                                        "sha256": sha256_file(self.genome), "chromosomes": self._index.names,
                                        "total_bp": self._index.total_bp}
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
            found = index.locate(queries[begin:end], probe_windows=self.options["probe_windows"],
                                 max_candidates=self.options["max_candidates"])
            loci[begin:end] = found.to_records()
            loci.flush()
            progress["located"] = end
            self._save()
            log.info("%s: located %d / %d rows (%.0f rows/s)", split, end, rows,
                     (end - first) / max(time.perf_counter() - started, 1e-9))

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
        if drop and rows and not kept_rows:
            raise UserError(f"--unlocated drop: none of the {rows} {split} rows is located exactly once in "
                            f"{self.genome}; is it the genome the data set was made from?",
                            hint="--unlocated keep keeps them, with their original input")
        windows = _open_array(final["sequences"], (kept_rows, context), np.uint8)
        if drop:
            all_labels = np.load(self._path(split, "all_labels"), mmap_mode="r")
            labels = _open_array(final["labels"], (kept_rows, N_PROFILES), np.uint8)
            loci = _open_array(final["loci"], (kept_rows,), LOCI_DTYPE)
        for begin in range(progress["written"], rows, self.chunk_rows):
            end = min(begin + self.chunk_rows, rows)
            chosen = begin + np.flatnonzero(kept[begin:end])
            target = slice(destination[begin], destination[end])
            windows[target] = index.cut_windows(Locations.from_records(all_loci[chosen]), inputs[chosen],
                                                context)
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

    def _manifest(self) -> dict:
        locate = None if self.genome is None else {
            "method": "exact match on either strand; canonical 32-mer index of 32-bp genome blocks",
            "probe_windows": self.options["probe_windows"], "max_candidates": self.options["max_candidates"]}
        manifest = {"format": FORMAT, "genolong_version": __version__,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "n_profiles": N_PROFILES,
                    "one_hot_order": ONE_HOT_ORDER, "sequence_encoding": "uint8 ASCII over ACGTN",
                    "input_length": next(iter(self.mats.values())).length, "context": self.options["context"],
                    "unlocated": self.options["unlocated"], "genome": self.state.get("genome"),
                    "locate": locate, "splits": {}}
        for split, mat in self.mats.items():
            labels = np.load(self.work / f"{split}.labels.npy", mmap_mode="r")
            positives = sum(labels[i : i + 65536].sum(dtype=np.int64) for i in range(0, len(labels), 65536))
            entry = {"source": self.state["sources"][split], "rows_in": mat.rows, "rows": len(labels),
                     "positive_labels": int(positives),
                     "strand_pairs": self.state["splits"][split]["strand_pairs"],
                     "files": {name: f"{split}.{name}.npy" for name in ("sequences", "labels")}}
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
                name: float(plus[part][located[part]].mean()) if located[part].any() else None for name,
                part in halves.items()}
        log.info("%s: located %d of %d rows (%.2f%%); %s", split, summary["located"], rows,
                 100 * summary["located_fraction"], summary)
        return summary
