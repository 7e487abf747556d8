"""The documentation as an executed contract: every shell block of README.md and docs/ runs.

`test_page_runs` (markers ``docs`` and ``slow``; its own CI step: ``pytest -m docs -q``) runs each page's
blocks in document order, after its hidden set-up, with ``bash -euo pipefail`` in a fresh
temporary directory, with ``genolong`` on PATH, ``GENOLONG_TESTS_DATA`` (the repository's
tests/data) and ``GENOLONG_HOME`` (an empty cache) set. Blocks marked
``<!-- docs-test: skip REASON -->`` are listed with their reasons as warnings. The other tests
are cheap and run by default: the directives parse, the README stays short.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from helpers.docs_blocks import Block, DocsBlockError, doc_pages, page_script, parse_blocks

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200
PAGE_TIMEOUT_S = 1800


class DocsSkippedBlock(UserWarning):
    """A documentation block that the docs test does not run, with the page's reason."""


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _pages_with_shell_blocks() -> list[Path]:
    pages = []
    for page in doc_pages(REPO):
        try:
            blocks = parse_blocks(page.read_text(), _name(page))
        except DocsBlockError:
            pages.append(page)  # the page's test reports the error
            continue
        if blocks:
            pages.append(page)
    return pages


def test_readme_is_short():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


@pytest.mark.parametrize("page", doc_pages(REPO), ids=_name)
def test_page_directives_parse(page):
    parse_blocks(page.read_text(), _name(page))


def test_readme_test_command_is_the_ci_command():
    ci_steps = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("pytest ")]
    readme = (REPO / "README.md").read_text()
    assert ci_steps and all(step in readme for step in ci_steps), ci_steps


@pytest.mark.parametrize(("markdown", "expected"), [
    ("```bash\necho a\n```\n", [Block(1, "echo a\n")]),
    ("<!-- docs-test: skip needs the internet -->\n```sh\ncurl x\n```\n",
     [Block(2, "curl x\n", skip_reason="needs the internet")]),
    ("<!-- docs-test: setup\n```bash\ncp a b\n```\n-->\n```python\nx = 1\n```\n```shell\nls\n```\n",
     [Block(2, "cp a b\n", setup=True), Block(9, "ls\n")]),
    ("```console\n$ genolong --version \\\n  -v\ngenolong 1.0\n$ ls\nout\n```\n",
     [Block(1, "genolong --version \\\n  -v\nls\n")]),
    ("1. step\n\n   ```bash\n   echo indented\n   ```\n", [Block(3, "echo indented\n")]),
])
def test_blocks_are_parsed(markdown, expected):
    assert parse_blocks(markdown, "page.md") == expected


@pytest.mark.parametrize("markdown", [
    "<!-- docs-test: skip -->\n```bash\nls\n```\n",                # no reason
    "<!-- docs-test: skip slow -->\n\n```bash\nls\n```\n",         # not directly above the fence
    "<!-- docs-test: setup\n```python\nx = 1\n```\n-->\n",         # set-up must be bash
    "<!-- docs-test: setup\n```bash\nls\n```\n",                   # comment never closed
    "```bash\nls\n",                                               # fence never closed
    "<!-- docs-test: skipp typo -->\n```bash\nls\n```\n",          # unknown directive
])
def test_malformed_directives_are_refused(markdown):
    with pytest.raises(DocsBlockError, match=r"page\.md:\d+: "):
        parse_blocks(markdown, "page.md")


@pytest.mark.docs
@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with_shell_blocks(), ids=_name)
def test_page_runs(page, tmp_path):
    name = _name(page)
    blocks = parse_blocks(page.read_text(), name)
    skipped = [block for block in blocks if block.skip_reason is not None]
    if skipped:
        warnings.warn(DocsSkippedBlock(f"{name}: not run: " + "; ".join(
            f"line {block.line} ({block.skip_reason})" for block in skipped)), stacklevel=1)
    work, home, state = tmp_path / "work", tmp_path / "home", tmp_path / "block"
    work.mkdir()
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("GENOLONG_")}
    env.update(GENOLONG_TESTS_DATA=str(REPO / "tests" / "data"), GENOLONG_HOME=str(home),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg")
    script = page_script([b for b in blocks if b.setup] + [b for b in blocks if not b.setup], str(state))
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                                capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        line = state.read_text().strip() if state.exists() else "?"
        pytest.fail(f"{name}:{line}: the page ran past {PAGE_TIMEOUT_S} s in this block", pytrace=False)
    if result.returncode != 0:
        line = state.read_text().strip() if state.exists() else "?"
        output = (result.stdout + result.stderr)[-4000:]
        pytest.fail(f"{name}:{line}: the block exited with status {result.returncode}\n{output}", pytrace=False)
