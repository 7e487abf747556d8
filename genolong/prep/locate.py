"""Locate short sequences in a genome by exact match, and cut long windows around them.

BigBird (Zaheer et al. 2020, App. F.3) trains the chromatin task on 8,000 bp of GRCh37 centred on
each 1,000-bp DeepSEA input, so each input is found again (exact match, either strand; GENA-LM used
``bwa fastmap``) and the window cut. :class:`GenomeIndex` files every N-free 32-bp block (starts
aligned to 32, 2 bits per base in a uint64, first base high) under its *canonical* k-mer, the smaller
of it and its reverse complement (17 bytes per block: 1.6 GB for GRCh37). A query of length ``L`` at
``p`` contains every block starting in ``[p, p + L - 32]``, so the 32 canonical 32-mers of any 63-bp
*probe window* find every occurrence; only the probe window with the fewest candidates is expanded
(repeats do not flood the verification). A query is LOCATED when it occurs exactly once on either
strand. Sequences are uint8 ASCII (``b"ACGTN"``), shape ``(rows, length)``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

import numpy as np

from genolong.core.errors import ConfigError
from genolong.datasets.chromatin import LocateStatus, Locations
from genolong.dna.genome import Genome
from genolong.dna.kmers import BLOCK, canonical_kmers, pack_kmers, rolling_kmers, swap_orientation
from genolong.dna.sequence import BASE_CODES, reverse_complement_rows

log = logging.getLogger(__name__)

#: Query span of one probe window: 32 consecutive offsets of 32-mers.
PROBE_SPAN = 2 * BLOCK - 1
#: Padding byte for window parts outside a chromosome and for unlocated rows.
N_BYTE = ord("N")

# All-T is never canonical (its reverse complement, all-A, is 0), so it can end the key table.
_SENTINEL = np.uint64(2**64 - 1)


class GenomeIndex:
    """A genome held in memory plus its canonical 32-mer block index (built by :meth:`from_records` or
    :meth:`from_fasta`): chromosome ``names`` in input order, their ``(chromosomes,)`` int64 ``starts``
    in ``sequence`` (multiples of 32) and ``lengths``; ``sequence`` is ``(total,)`` uint8 ASCII, every
    chromosome padded with N to a multiple of 32."""

    def __init__(self, names, starts, lengths, sequence, keys, key_starts, blocks, orient):
        self.names = list(names)
        self.starts = np.asarray(starts, np.int64)
        self.lengths = np.asarray(lengths, np.int64)
        self.sequence = sequence
        self.total_bp = int(self.lengths.sum())
        self.indexed_blocks = len(blocks)
        # The index proper. Entries (one per N-free block) are sorted by canonical k-mer;
        # distinct key i owns entries key_starts[i] .. key_starts[i + 1] - 1.
        self._keys = keys  # (distinct + 1,) uint64, sorted, then the sentinel
        self._key_starts = key_starts  # (distinct + 2,) int64
        self._blocks = blocks  # (entries,) uint32 block number = genome offset / 32
        self._orient = orient  # (entries,) uint8 orientation of the block vs its canonical k-mer

    @classmethod
    def from_fasta(cls, path: str | os.PathLike) -> GenomeIndex:
        """Stream a FASTA genome (plain, gzip or bgzip) into memory and index it."""
        return cls.from_records((record.name, record.sequence) for record in Genome(path).records())

    @classmethod
    def from_records(cls, records: Iterable[tuple[str, str]]) -> GenomeIndex:
        """Index ``(name, sequence)`` records (cleaned: uppercase ``ACGTN``)."""
        names, starts, lengths, pieces = [], [], [], []
        keys, blocks, orient = [], [], []
        offset = 0
        for name, seq in records:
            ascii_seq = np.frombuffer(seq.encode("ascii"), np.uint8)
            padded = -(-len(ascii_seq) // BLOCK) * BLOCK
            names.append(name)
            starts.append(offset)
            lengths.append(len(ascii_seq))
            pieces += [ascii_seq, np.full(padded - len(ascii_seq), N_BYTE, np.uint8)]
            codes = BASE_CODES[ascii_seq[: len(ascii_seq) // BLOCK * BLOCK]].reshape(-1, BLOCK)  # (blocks, 32)
            clean = np.flatnonzero((codes < 4).all(axis=1))
            chrom_keys, chrom_orient = canonical_kmers(pack_kmers(codes[clean]),
                                                       pack_kmers(3 - codes[clean, ::-1]))
            keys.append(chrom_keys)
            orient.append(chrom_orient)
            blocks.append((offset // BLOCK + clean).astype(np.uint32))
            offset += padded
        if offset // BLOCK >= 2**32:
            raise ConfigError(f"genome of {offset:,} bp is too large for 32-bit block numbers")
        sequence = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
        del pieces
        keys = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        blocks = (np.concatenate(blocks) if blocks else np.zeros(0, np.uint32))[order]
        orient = (np.concatenate(orient) if orient else np.zeros(0, np.uint8))[order]
        del order
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, np.int64)
        log.info("indexed %d chromosomes, %s bp, %s blocks (%s distinct)", len(names), f"{sum(lengths):,}",
                 f"{len(keys):,}", f"{len(first):,}")
        # A sentinel key that owns no entries ends the table: every search lands inside it.
        distinct = np.append(keys[first], _SENTINEL)
        key_starts = np.append(first, [len(keys), len(keys)]).astype(np.int64)
        return cls(names, starts, lengths, sequence, distinct, key_starts, blocks, orient)

    def locate(self, queries: np.ndarray, *, probe_windows: int = 8, max_candidates: int = 20_000,
               batch_rows: int = 8192, max_batch_candidates: int = 2_000_000) -> Locations:
        """Find every exact occurrence of each ``(rows, length)`` uint8 ASCII query on either strand;
        returns :class:`Locations`, one entry per query. Of ``probe_windows`` spread evenly, the one with
        the fewest candidates is verified (more than ``max_candidates``: TOO_REPETITIVE), ``batch_rows``
        queries at a time, ``max_batch_candidates`` candidates at once (bounds memory)."""
        if queries.ndim != 2:
            raise ValueError(f"queries must be (rows, length), got shape {queries.shape}")
        if probe_windows < 1 or max_candidates < 1:
            raise ConfigError("probe_windows and max_candidates must be positive")
        rows, length = queries.shape
        if length < PROBE_SPAN:
            raise ConfigError(f"queries of {length} bp are too short to locate; "
                              f"need at least {PROBE_SPAN} bp")
        window_starts = np.unique(np.linspace(0, length - PROBE_SPAN, probe_windows).round().astype(np.int64))
        result = Locations.empty(rows)
        for begin in range(0, rows, batch_rows):
            end = min(begin + batch_rows, rows)
            self._locate_batch(np.asarray(queries[begin:end]), window_starts, max_candidates,
                               max_batch_candidates, result, begin)
        return result

    def _count(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First index entry and number of entries of each canonical key (any shape)."""
        flat = keys.ravel()
        order = np.argsort(flat)  # sorted needles make the binary searches cache-friendly
        position = np.empty_like(order)
        position[order] = np.searchsorted(self._keys, flat[order])  # < len(self._keys) thanks to the sentinel
        first = self._key_starts[position]
        count = np.where(self._keys[position] == flat, self._key_starts[position + 1] - first, 0)
        return first.reshape(keys.shape), count.reshape(keys.shape)

    def _locate_batch(self, queries, window_starts, max_candidates, max_batch_candidates, result, row0):
        """Locate ``queries`` ``(rows, length)`` into ``result`` rows ``row0 ..``: count the candidates of
        every probe window, expand the cheapest usable one of each query and verify its candidates."""
        rows, length = queries.shape
        codes = BASE_CODES[queries]  # (rows, length)
        spans = codes[:, window_starts[:, None] + np.arange(PROBE_SPAN)]  # (rows, windows, 63)
        usable = (spans < 4).all(axis=-1)  # (rows, windows)
        spans = np.where(spans < 4, spans, 0)  # unusable windows get dummy k-mers, never expanded
        forward = rolling_kmers(spans)  # (rows, windows, 32)
        reverse = rolling_kmers(3 - spans[..., ::-1])[..., ::-1]  # reverse complement of each k-mer
        keys, orient = canonical_kmers(forward, reverse)
        first, count = self._count(keys)
        cost = np.where(usable, count.sum(axis=-1), np.iinfo(np.int64).max)  # (rows, windows)
        best = np.argmin(cost, axis=1)
        best_cost = cost[np.arange(rows), best]
        status = result.status[row0 : row0 + rows]
        status[~usable.any(axis=1)] = LocateStatus.TOO_MANY_N
        status[usable.any(axis=1) & (best_cost > max_candidates)] = LocateStatus.TOO_REPETITIVE
        searched = np.flatnonzero(status == LocateStatus.NOT_FOUND)
        if len(searched) == 0:
            return
        # The 32 k-mers of each searched query's best window: (searched, 32) each.
        take = (searched, best[searched])
        first, count, orient = first[take], count[take], orient[take]
        offsets = window_starts[best[searched]][:, None] + np.arange(BLOCK)
        reverse = reverse_complement_rows(queries)
        # Verify in groups of queries whose candidates fit in max_batch_candidates.
        per_query = count.sum(axis=1)
        group_of = np.cumsum(per_query) // max_batch_candidates
        for group in np.unique(group_of):
            members = np.flatnonzero(group_of == group)
            hit_row, hit_pos, hit_strand = self._verify(queries, reverse, searched[members], first[members],
                                                        count[members], orient[members], offsets[members])
            self._record(result, row0, searched[members], hit_row, hit_pos, hit_strand)

    def _verify(self, queries, reverse, query_rows, first, count, orient, offsets):
        """``(row, position, strand)`` of every verified candidate of the batch ``queries`` and its
        ``reverse`` complements ``(rows, length)``: ``query_rows`` ``(q,)`` searched, with ``first``,
        ``count``, ``orient``, ``offsets`` ``(q, 32)``: index range, orientation, offset of each probe."""
        length = queries.shape[1]
        flat_count = count.ravel()
        total = int(flat_count.sum())
        kmer = np.repeat(np.arange(flat_count.size), flat_count)  # (total,) which probe k-mer
        within = np.arange(total) - np.repeat(np.cumsum(flat_count) - flat_count, flat_count)
        entry = first.ravel()[kmer] + within
        block_pos = self._blocks[entry].astype(np.int64) * BLOCK
        genome_orient = self._orient[entry]
        query_orient = orient.ravel()[kmer]
        offset = offsets.ravel()[kmer]
        row = query_rows[kmer // BLOCK]
        plus = (query_orient & genome_orient) != 0
        minus = (query_orient & swap_orientation(genome_orient)) != 0
        row = np.concatenate([row[plus], row[minus]])
        position = np.concatenate(
            [block_pos[plus] - offset[plus], block_pos[minus] - (length - offset[minus] - BLOCK)])
        strand = np.concatenate([np.ones(plus.sum(), np.int8), -np.ones(minus.sum(), np.int8)])
        anchor = np.concatenate([block_pos[plus], block_pos[minus]])
        chrom = np.searchsorted(self.starts, anchor, side="right") - 1
        inside = (position >= self.starts[chrom]) & (
            position + length <= self.starts[chrom] + self.lengths[chrom])
        row, position, strand = row[inside], position[inside], strand[inside]
        # Prefilter on 32 spread bases, then compare all of them, a slice at a time.
        for columns in (np.linspace(0, length - 1, BLOCK).astype(np.int64), np.arange(length)):
            keep = np.zeros(len(row), bool)
            for begin in range(0, len(row), 4096):
                part = slice(begin, begin + 4096)
                genome = self.sequence[position[part, None] + columns]  # (part, columns)
                oriented = np.where(strand[part, None] > 0, queries[row[part, None], columns],
                                    reverse[row[part, None], columns])
                keep[part] = (genome == oriented).all(axis=1)
            row, position, strand = row[keep], position[keep], strand[keep]
        return row, position, strand

    def _record(self, result: Locations, row0: int, searched, hit_row, hit_pos, hit_strand) -> None:
        """Store the verified hits of the batch rows ``searched`` into ``result`` (batch starts at ``row0``)."""
        hits = np.bincount(np.searchsorted(searched, hit_row), minlength=len(searched))
        result.hits[row0 + searched] = hits
        result.status[row0 + searched] = np.select(
            [hits == 1, hits > 1], [LocateStatus.LOCATED, LocateStatus.AMBIGUOUS], LocateStatus.NOT_FOUND)
        order = np.lexsort((hit_pos, hit_row))  # by row, then lowest position first
        rows, first = np.unique(hit_row[order], return_index=True)
        position, strand = hit_pos[order][first], hit_strand[order][first]
        chrom = np.searchsorted(self.starts, position, side="right") - 1
        result.chrom[row0 + rows] = chrom
        result.start[row0 + rows] = position - self.starts[chrom]
        result.strand[row0 + rows] = strand

    def cut_windows(self, locations: Locations, queries: np.ndarray, context: int) -> np.ndarray:
        """``(rows, context)`` uint8 ASCII windows centred on the ``(rows, length)`` queries located by
        ``locations``: ``window[:, flank:flank + length]`` is the query, ``flank = (context - length) // 2``.
        LOCATED rows get the genome around the occurrence, reverse-complemented for minus-strand hits
        (N beyond the chromosome ends); other rows get the query in the centre, N elsewhere."""
        rows, length = queries.shape
        flank = centred_flank(context, length)
        windows = np.full((rows, context), N_BYTE, np.uint8)
        located = np.flatnonzero(locations.status == LocateStatus.LOCATED)
        for row in located:
            chrom = locations.chrom[row]
            chrom_start, chrom_end = self.starts[chrom], self.starts[chrom] + self.lengths[chrom]
            begin = chrom_start + locations.start[row] - flank
            lo, hi = max(begin, chrom_start), min(begin + context, chrom_end)
            windows[row, lo - begin : hi - begin] = self.sequence[lo:hi]
        minus = located[locations.strand[located] < 0]
        windows[minus] = reverse_complement_rows(windows[minus])
        unlocated = np.flatnonzero(locations.status != LocateStatus.LOCATED)
        windows[unlocated, flank : flank + length] = queries[unlocated]
        return windows


def centred_flank(context: int, length: int) -> int:
    """Bases on each side of a ``length``-bp input centred in a ``context``-bp window."""
    if context < length or (context - length) % 2:
        raise ConfigError(f"context {context} must be at least the input length {length} and differ from it "
                          "by an even number, so that the input sits exactly in the centre")
    return (context - length) // 2
