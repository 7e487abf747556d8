"""BPE token ids of variants' windows without tokenising every window whole.

Overlapping reference windows are merged into a region tokenised once, each window's tokens being the
region's with ``margin`` + 1 tokens at each edge re-tokenised (:meth:`SplicingTokenizer.cropped`); a
substitution's alternative tokens are the reference's with the touched tokens, plus ``margin`` each side,
re-tokenised (:meth:`SplicingTokenizer.substituted`). This is exact when every seam is a valid pair
(checked, cached): the BPE encoding of a text is its only valid token sequence, a stretch of a valid
sequence is valid, and a valid sequence followed by ``t`` is valid when its last token and ``t`` are a valid
pair (Corollaries II and IIIa of the ``bpe`` crate of github/rust-gems, ``crates/bpe/README.md``).
Otherwise, and for indels, padded windows and re-tokenised stretches holding an ``N`` (tokenizers that
normalise ``N`` runs would see them cut), the window is tokenised whole.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from genolong.dna.sequence import clean, reverse_complement
from genolong.inference.variants.windows import VariantWindows


@dataclass(frozen=True)
class Tokens:
    """The BPE tokens of a text: ``ids`` (T,) and the end of each token in the text, bp (T,)."""

    ids: list[int]
    ends: list[int]


class SplicingTokenizer:
    """Tokens of texts (``backend``: a HF ``tokenizers.Tokenizer``), and of a stretch or a substitution of a
    tokenised text from its tokens, re-tokenising ``margin`` tokens beyond those touched (module
    docstring); ``spliced`` and ``whole`` count the splices shown exact and refused."""

    def __init__(self, backend, margin: int = 2):
        self.backend, self.margin = backend, margin
        self.pairs: dict[tuple[int, int], bool] = {}
        self.spliced = self.whole = 0

    def encode(self, texts: list[str]) -> list[Tokens]:
        """Tokens of each text (cleaned to ``ACGTN`` first, as :class:`TokenEncoder` does)."""
        encodings = self.backend.encode_batch([clean(t) for t in texts], add_special_tokens=False)
        return [Tokens(e.ids, [end for _, end in e.offsets]) for e in encodings]

    def valid_pair(self, left: int, right: int) -> bool:
        """Whether the encoding of the two tokens' texts joined is ``[left, right]``."""
        pair = (left, right)
        if pair not in self.pairs:
            text = self.backend.id_to_token(left) + self.backend.id_to_token(right)
            self.pairs[pair] = self.backend.encode(text, add_special_tokens=False).ids == [left, right]
        return self.pairs[pair]

    def _piece(self, text: str) -> Tokens | None:
        """Tokens of a stretch tokenised alone (ends relative to it); None when it holds an ``N``."""
        if "N" in text:
            return None
        encoding = self.backend.encode(text, add_special_tokens=False)
        return Tokens(encoding.ids, [end for _, end in encoding.offsets])

    def _joined(self, runs: list[tuple[list[int], list[int]]]) -> Tokens | None:
        """Valid token runs ``(ids, ends)`` joined, or None when a seam is not a valid pair."""
        runs = [run for run in runs if run[0]]
        for (left, _), (right, _) in itertools.pairwise(runs):
            if not self.valid_pair(left[-1], right[0]):
                self.whole += 1
                return None
        self.spliced += 1
        return Tokens([i for ids, _ in runs for i in ids], [e for _, ends in runs for e in ends])

    def substituted(self, reference: Tokens, text: str, start: int, end: int) -> Tokens | None:
        """The tokens of ``text``, which equals the reference's text but for the bases
        ``[start, end)``; None when the splice cannot be shown exact (module docstring)."""
        ends = reference.ends
        first = max(0, bisect.bisect_right(ends, start) - self.margin)
        last = min(len(ends), bisect.bisect_right(ends, end - 1) + 1 + self.margin)  # tokens [first, last)
        begin = ends[first - 1] if first else 0
        local = self._piece(text[begin : ends[last - 1]])
        if local is None:
            return None
        return self._joined([(reference.ids[:first], ends[:first]), (local.ids, [begin + e for e in local.ends]),
                             (reference.ids[last:], ends[last:])])

    def cropped(self, region: Tokens, text: str, start: int, end: int) -> Tokens | None:
        """The tokens of ``text[start:end]`` (ends relative to ``start``) from those of ``text``:
        the region's tokens between two re-tokenised edge stretches; None when not shown exact."""
        ends = region.ends
        first = bisect.bisect_right(ends, start) + self.margin + 1  # region tokens [first, last) are kept
        last = bisect.bisect_right(ends, end - 1) - self.margin
        if first > last:
            return None
        left = self._piece(text[start : ends[first - 1]])
        right = self._piece(text[ends[last - 1] : end])
        if left is None or right is None:
            return None
        return self._joined([(left.ids, left.ends), (region.ids[first:last], [e - start for e in ends[first:last]]),
                             (right.ids, [ends[last - 1] - start + e for e in right.ends])])


def substitution(window: VariantWindows, reverse: bool) -> tuple[int, int] | None:
    """The bases ``[start, end)`` where an unpadded window's substitution differs on the strand, else None."""
    start, ref_length, alt_length = window.allele
    if ref_length != alt_length or window.centre is not None:
        return None
    if reverse:
        return len(window.ref_window) - start - ref_length, len(window.ref_window) - start
    return start, start + ref_length


class WindowInputs:
    """The model's token inputs for the windows of a chunk of variants, cropped as the classifier's
    :class:`~genolong.classifier.directory.TokenEncoder` ``encoder`` crops (with ``rc``, both strands);
    ``group`` windows are tokenised per call (bounding memory)."""

    def __init__(self, tokenizer: SplicingTokenizer, encoder, rc: bool, group: int = 64):
        self.tokenizer, self.encoder, self.group = tokenizer, encoder, group
        self.strands = (False, True) if rc else (False,)

    def bodies(self, windows: list[VariantWindows]) -> tuple[dict, dict]:
        """The kept (T,) int64 token ids of the distinct inputs, by ``(ref_key, reverse)`` and ``(alt_window,
        centre, reverse)``: :class:`TokenEncoder`'s on the same sequence and centre (mirrored on reverse)."""
        references, alternatives = {}, {}
        for first in range(0, len(windows), self.group):
            for reverse in self.strands:
                self._add(windows[first : first + self.group], reverse, references, alternatives)
        return references, alternatives

    def _references(self, windows: list[VariantWindows], reverse: bool) -> dict[tuple[str, int], Tokens]:
        """ref_key -> tokens of each distinct reference window: windows that overlap are cropped
        from the tokens of their region, tokenised once; padded windows are tokenised whole."""
        tokens, whole = {}, [w for w in windows if w.centre is not None]
        for region, members in overlapping(windows):
            text = strand(region, reverse)
            (region_tokens,) = self.tokenizer.encode([text])
            for window, offset in members:
                size = len(window.ref_window)
                start = len(text) - offset - size if reverse else offset
                cut = region_tokens if len(members) == 1 else self.tokenizer.cropped(region_tokens, text, start,
                                                                                      start + size)
                if cut is None:
                    whole.append(window)
                else:
                    tokens[window.ref_key] = cut
        encoded = self.tokenizer.encode([strand(w.ref_window, reverse) for w in whole])
        tokens.update((w.ref_key, t) for w, t in zip(whole, encoded, strict=True))
        return tokens

    def _add(self, group: list[VariantWindows], reverse: bool, references: dict, alternatives: dict) -> None:
        unique = {w.ref_key: w for w in group}
        tokens = self._references(list(unique.values()), reverse)
        for key, window in unique.items():
            references.setdefault((key, reverse), self._body(tokens[key], window, reverse))
        whole = {}
        for window in group:
            key = (window.alt_window, window.centre, reverse)
            if key in alternatives or key in whole:
                continue
            span = substitution(window, reverse)
            text = strand(window.alt_window, reverse)
            spliced = None if span is None else self.tokenizer.substituted(tokens[window.ref_key], text, *span)
            if spliced is None:
                whole[key] = window
            else:
                alternatives[key] = self._body(spliced, window, reverse)
        encoded = self.tokenizer.encode([strand(w.alt_window, reverse) for w in whole.values()])
        for (key, window), alt_tokens in zip(whole.items(), encoded, strict=True):
            alternatives[key] = self._body(alt_tokens, window, reverse)

    def _body(self, tokens: Tokens, window: VariantWindows, reverse: bool) -> np.ndarray:
        """The kept tokens: the central ones, or those around the variant's token in a padded window."""
        centre = window.centre
        if centre is not None:
            base = len(window.ref_window) - 1 - centre if reverse else centre
            centre = bisect.bisect_right(tokens.ends, base)
        return np.asarray(tokens.ids[self.encoder.kept(len(tokens.ids), centre)], dtype=np.int64)


def strand(sequence: str, reverse: bool) -> str:
    return reverse_complement(sequence) if reverse else sequence


def overlapping(windows: list[VariantWindows]) -> Iterator[tuple[str, list[tuple[VariantWindows, int]]]]:
    """Distinct unpadded reference windows merged where they overlap: ``(region sequence,
    [(window, its start in the region), ...])``, each region from the windows' own sequences."""
    region, members, region_start = "", [], 0
    for window in sorted((w for w in windows if w.centre is None), key=lambda w: w.ref_key):
        contig, first = window.ref_key
        if members and (contig != members[0][0].ref_key[0] or first >= region_start + len(region)):
            yield region, members
            members = []
        if members:
            region += window.ref_window[region_start + len(region) - first :]
        else:
            region, region_start = window.ref_window, first
        members.append((window, first - region_start))
    if members:
        yield region, members
