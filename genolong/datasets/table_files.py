"""The cells of a table file: CSV / TSV (plain or compressed), Parquet, an Arrow stream file, or an
HF ``datasets`` ``save_to_disk`` directory (read with pyarrow alone), as column names and rows.
Broken input (a compressed file cut short, text that is not UTF-8, a header without rows, a row with
the wrong number of fields) is one :class:`~genolong.core.errors.InputError` naming the file and line
or row. A CSV / TSV field may be as long as the file (a 250-kb sequence in one cell)."""

from __future__ import annotations

import csv
import io
import lzma
import zlib
from pathlib import Path

from genolong.core.errors import InputError, first_line
from genolong.core.files import csv_field_limit
from genolong.dna.sequence import open_text_or_gzip

#: Bytes read from a (compressed) table at a time.
CHUNK_BYTES = 1 << 20


def read_cells(path: Path, header: bool) -> tuple[list[str], list[tuple[int, list]]]:
    """Column names and ``(1-based line or row, values)`` of each data row of a table file."""
    if path.is_dir() or path.suffix in (".parquet", ".arrow"):
        table = arrow_table(path)
        columns = table.column_names
        values = [table.column(name).to_pylist() for name in columns]
        lines = [(i + 1, list(row)) for i, row in enumerate(zip(*values, strict=True))]
        if not lines:
            raise InputError(path, f"no rows (columns {columns[:20]})", hint="give a table with rows")
        return columns, lines
    text = _csv_text(path)
    delimiter = "\t" if ".tsv" in path.suffixes or ".txt" in path.suffixes else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        with csv_field_limit(len(text)):
            lines = [(number, row) for number, row in enumerate(reader, start=1) if row]
    except csv.Error as err:
        raise InputError(path, f"not a {'TSV' if delimiter == chr(9) else 'CSV'} table ({err})",
                         line=reader.line_num) from None
    if not lines:
        raise InputError(path, "empty table", hint="give a table with a header and rows")
    if header:
        (_, columns), lines = lines[0], lines[1:]
        if not lines:
            raise InputError(path, "a header and no rows", line=1, hint="add the rows below the header")
    else:
        columns = [str(i) for i in range(len(lines[0][1]))]
    for number, row in lines:
        if len(row) != len(columns):
            raise InputError(path, f"{len(row)} fields where the table has {len(columns)} columns", line=number)
    return columns, lines


def _csv_text(path: Path) -> str:
    """The text of a CSV / TSV file (plain or compressed, UTF-8 with or without a byte-order mark)."""
    data = bytearray()
    try:
        with open_text_or_gzip(path) as handle:
            while chunk := handle.read(CHUNK_BYTES):
                data += chunk
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as err:
        line = data.count(b"\n") + 1
        what = "the compressed data ends early" if isinstance(err, EOFError) else f"cannot read it ({first_line(err)})"
        raise InputError(path, f"{what}, in line {line}", hint="the file is truncated or damaged: copy or "
                         "download it again") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(path, f"byte 0x{data[err.start]:02x} is not UTF-8 text", line=line,
                         hint=f"save the table as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path.name} > "
                         f"{path.stem}.utf8{path.suffix}`") from None


def arrow_table(path: Path):
    """A Parquet file, an Arrow stream file, or an HF ``save_to_disk`` directory (its ``*.arrow`` files) as one table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = (sorted(path.glob("*.arrow")) or sorted(path.glob("*.parquet"))) if path.is_dir() else [path]
    if not files:
        raise InputError(path, "no .arrow or .parquet files: not a `datasets` save_to_disk directory")
    try:
        tables = [pq.read_table(f) if f.suffix == ".parquet" else pa.ipc.open_stream(pa.memory_map(str(f))).read_all()
                  for f in files]
    except (pa.ArrowException, OSError) as err:
        raise InputError(files[0], f"cannot read as Arrow/Parquet: {str(err).splitlines()[0]}") from None
    return pa.concat_tables(tables)


def expand_lists(path: Path, lines: list[tuple[int, list]], columns: list[str],
                 at: dict[str, int]) -> tuple[list[str], dict[str, int]]:
    """The label columns, each list column of ``columns`` read as ``NAME_0``, ``NAME_1``..., and ``{NAME:
    list length}``; an InputError names a list column's row that holds another length or no list."""
    expanded, lists = [], {}
    for name in columns:
        cells = [(number, values[at[name]]) for number, values in lines]
        if not any(isinstance(cell, list) for _, cell in cells):
            expanded.append(name)
            continue
        first_row, first = next((number, cell) for number, cell in cells if isinstance(cell, list))
        for number, cell in cells:
            if not isinstance(cell, list) or len(cell) != len(first):
                held = f"a list of {len(cell)}" if isinstance(cell, list) else repr(cell)
                raise InputError(path, f"column {name!r} holds {held} here and a list of {len(first)} in row "
                                 f"{first_row}", line=number, hint="a list column needs one list of the same "
                                 "length per row (one label per element)")
        lists[name] = len(first)
        expanded += [f"{name}_{i}" for i in range(len(first))]
    return expanded, lists
