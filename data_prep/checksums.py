"""Checksums: SHA-256 for our own records, and the providers' published checksum files.

Providers publish checksums in two formats that matter here:

- UCSC ``md5sum.txt`` (``goldenPath/hg19/bigZips``): the output of ``md5sum``,
  ``<32 hex digits>  <file name>`` per line.
- Ensembl ``CHECKSUMS``: the output of the Unix ``sum`` command,
  ``<checksum> <blocks> <file name>`` per line, where ``checksum`` is the 16-bit BSD
  checksum and ``blocks`` the size in 1024-byte blocks, rounded up (GNU ``sum -r``).

Every hasher here has the ``hashlib`` interface (``update(bytes)``, ``hexdigest()``), so a
download can feed all the digests it needs from one pass over the bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from genolong.errors import UserError

#: Algorithms understood by :func:`new_hasher`.
ALGORITHMS = ("sha256", "md5", "bsd-sum")

# rotate-right-by-one of the low 16 bits of every value a BSD-sum state can take before
# masking (at most 0xFFFF + 0xFF), so that the inner loop is one lookup and one addition.
_ROTATE_RIGHT = [((x & 0xFFFF) >> 1) | ((x & 1) << 15) for x in range(0x10000 + 0x100)]


class BsdSum:
    """The BSD ``sum`` checksum (GNU ``sum -r``, the default of ``sum`` on Linux).

    For each byte: rotate the 16-bit checksum right by one bit, add the byte, keep 16 bits.
    ``hexdigest()`` returns ``"<checksum> <blocks>"`` with 1024-byte blocks, the two numbers
    that ``sum`` prints. Pure Python, about 35 MB/s.
    """

    name = "bsd-sum"

    def __init__(self) -> None:
        self._state = 0  # unmasked: the low 16 bits are the checksum
        self.size = 0

    def update(self, data: bytes) -> None:
        state, table = self._state, _ROTATE_RIGHT
        for byte in data:
            state = table[state] + byte
        self._state = state
        self.size += len(data)

    @property
    def checksum(self) -> int:
        return self._state & 0xFFFF

    def hexdigest(self) -> str:
        return f"{self.checksum} {-(-self.size // 1024)}"


def new_hasher(algorithm: str):
    """A fresh hasher for ``algorithm`` (one of :data:`ALGORITHMS`)."""
    if algorithm == "bsd-sum":
        return BsdSum()
    if algorithm in ("sha256", "md5"):
        return hashlib.new(algorithm)
    raise ValueError(f"unknown checksum algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")


def file_digests(
    path: str | os.PathLike, algorithms: Iterable[str], *, chunk_size: int = 1 << 20
) -> dict[str, str]:
    """Digest the whole file at ``path`` with every algorithm in one read."""
    hashers = {name: new_hasher(name) for name in algorithms}
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            for hasher in hashers.values():
                hasher.update(chunk)
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}


@dataclass(frozen=True)
class Checksum:
    """An expected digest and where it came from.

    Attributes:
        algorithm: one of :data:`ALGORITHMS`.
        value: lowercase hex digest, or ``"<checksum> <blocks>"`` for ``bsd-sum``.
        origin: where the value was read (a URL, a file, ``--sha256``), for messages.
    """

    algorithm: str
    value: str
    origin: str

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown checksum algorithm {self.algorithm!r}")
        pattern = {"sha256": r"[0-9a-f]{64}", "md5": r"[0-9a-f]{32}", "bsd-sum": r"\d+ \d+"}[self.algorithm]
        if not re.fullmatch(pattern, self.value):
            raise UserError(f"malformed {self.algorithm} value {self.value!r} from {self.origin}")


def satisfied(digests: dict[str, str], expected: Iterable[Checksum]) -> bool:
    """True if ``digests`` (algorithm -> value) agree with every checksum in ``expected``."""
    return all(digests.get(check.algorithm) == check.value for check in expected)


def sha256_checksum(value: str, origin: str = "--sha256") -> Checksum:
    """A user-given SHA-256 (case-insensitive hex), checked for shape."""
    return Checksum("sha256", value.strip().lower(), origin)


def parse_md5sum(text: str, filename: str, origin: str) -> Checksum | None:
    """The MD5 of ``filename`` in ``md5sum`` output (UCSC ``md5sum.txt``), or None if unlisted."""
    for line in text.splitlines():
        match = re.fullmatch(r"([0-9a-fA-F]{32}) [ *](?:\./)?(.+?)\s*", line)
        if match and match.group(2) == filename:
            return Checksum("md5", match.group(1).lower(), origin)
    return None


def parse_sum_checksums(text: str, filename: str, origin: str) -> Checksum | None:
    """The BSD ``sum`` of ``filename`` in Ensembl ``CHECKSUMS``, or None if unlisted."""
    for line in text.splitlines():
        match = re.fullmatch(r"\s*(\d+)\s+(\d+)\s+(?:\./)?(.+?)\s*", line)
        if match and match.group(3) == filename:
            return Checksum("bsd-sum", f"{int(match.group(1))} {int(match.group(2))}", origin)
    return None


#: Parsers of the providers' checksum-file formats, by format name.
CHECKSUM_FILE_PARSERS = {"md5sum": parse_md5sum, "sum": parse_sum_checksums}
