"""The shell blocks of the documentation: what `tests/test_docs.py` runs, page by page.

A page is ``README.md`` or any ``docs/**/*.md``. Its shell blocks are the fenced blocks whose
language is ``bash``, ``sh``, ``shell`` or ``console`` (of a ``console`` block only the ``$ ``
lines run, with their ``\\`` continuation lines; the rest is output). Two HTML comments, which
the rendered page does not show, steer the test:

- ``<!-- docs-test: skip REASON -->`` on the line directly above a fence: the block is not
  run, and it is listed with its reason. A skip without a reason is an error.
- ``<!-- docs-test: setup``, a ``bash`` fenced block, ``-->``: the page's hidden set-up, run
  before its visible blocks in the order it appears.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\b(?P<reason>.*?)-->\s*$")
SETUP_OPEN = re.compile(r"^\s*<!--\s*docs-test:\s*setup\s*$")
DIRECTIVE = re.compile(r"<!--\s*docs-test:")


class DocsBlockError(ValueError):
    """A page whose test directives are malformed (the message names the page and line)."""


@dataclass(frozen=True)
class Block:
    """One shell block of a page.

    Attributes:
        line: 1-based line number of the opening fence.
        script: the commands, dedented to the fence's indentation.
        skip_reason: why the block is not run, or None when it runs.
        setup: True for a hidden set-up block.
    """

    line: int
    script: str
    skip_reason: str | None = None
    setup: bool = False


def doc_pages(repo: Path) -> list[Path]:
    """``README.md`` then every ``docs/**/*.md``, in sorted order."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def _console_commands(lines: list[str]) -> list[str]:
    """The ``$ `` command lines of a console transcript, with their continuation lines."""
    commands, continuing = [], False
    for line in lines:
        if continuing:
            commands.append(line)
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            continue
        continuing = line.rstrip().endswith("\\")
    return commands


def parse_blocks(text: str, page: str) -> list[Block]:
    """Every shell block of a page, in document order.

    Args:
        text: the Markdown source.
        page: the page's name, for error messages.

    Returns:
        The blocks, set-up blocks included (``setup=True``).

    Raises:
        DocsBlockError: a skip without a reason, a set-up comment without exactly one bash
            block, a directive not directly above a fence, or an unclosed fence.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    in_setup_comment = setup_line = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if SETUP_OPEN.match(line):
            if in_setup_comment:
                raise DocsBlockError(f"{page}:{i + 1}: a set-up comment inside another")
            in_setup_comment, setup_line = True, i + 1
            i += 1
            continue
        if in_setup_comment and line.strip() == "-->":
            if not any(block.setup and block.line > setup_line for block in blocks):
                raise DocsBlockError(f"{page}:{setup_line}: a set-up comment without a bash block")
            in_setup_comment = False
            i += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            skip = SKIP.match(line)
            if skip or (DIRECTIVE.search(line) and not SETUP_OPEN.match(line)):
                following = lines[i + 1] if i + 1 < len(lines) else ""
                if not skip or not FENCE.match(following):
                    raise DocsBlockError(f"{page}:{i + 1}: a docs-test directive must be "
                                         "`<!-- docs-test: skip REASON -->` directly above a fence")
            i += 1
            continue
        indent, marker, lang = fence["indent"], fence["fence"], fence["lang"].lower()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(marker):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise DocsBlockError(f"{page}:{i + 1}: a fence that is never closed")
        if lang in SHELL_LANGUAGES:
            if in_setup_comment and lang != "bash":
                raise DocsBlockError(f"{page}:{i + 1}: a set-up block must be ```bash")
            skip = SKIP.match(lines[i - 1]) if i else None
            reason = None
            if skip:
                reason = skip["reason"].strip()
                if not reason:
                    raise DocsBlockError(f"{page}:{i}: `docs-test: skip` needs a reason")
                if in_setup_comment:
                    raise DocsBlockError(f"{page}:{i}: a set-up block cannot be skipped")
            commands = _console_commands(body) if lang == "console" else body
            blocks.append(Block(i + 1, "\n".join(commands) + "\n", reason, bool(in_setup_comment)))
        elif in_setup_comment:
            raise DocsBlockError(f"{page}:{i + 1}: a set-up block must be ```bash")
        i = j + 1
    if in_setup_comment:
        raise DocsBlockError(f"{page}:{setup_line}: a set-up comment that is never closed with -->")
    return blocks


def page_script(blocks: list[Block], state_file: str) -> str:
    """One bash script running a page's blocks in order.

    Before each block the script writes the block's line number to ``state_file``, so that a
    failure can be traced to its block. Skipped blocks are left out.
    """
    parts = []
    for block in blocks:
        if block.skip_reason is None:
            parts.append(f"printf '%s\\n' {block.line} > {state_file!r}\n{block.script}")
    return "".join(parts)
