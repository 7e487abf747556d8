"""data_prep holds builders: training, inference and evaluation code never imports it, and it never
imports training. Read from the source (every import statement, function-level ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Packages of genolong that builders must not depend on (they train, predict or evaluate models).
TRAINING = ("genolong.tasks", "genolong.model", "genolong.attention", "genolong.inference", "genolong.bench")


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, relative imports resolved against ``package``."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            modules.add(module)
            modules.update(f"{module}.{alias.name}" for alias in node.names)
    return modules


def test_imported_modules_resolves_absolute_relative_and_nested_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os.path\nfrom .kmers import BLOCK\n\ndef f():\n    from genolong.data_prep import cache\n")
    assert imported_modules(source, "genolong.data_prep") == {
        "os.path", "genolong.data_prep.kmers", "genolong.data_prep.kmers.BLOCK",
        "genolong.data_prep", "genolong.data_prep.cache",
    }


def library_modules() -> list[Path]:
    return sorted(path for path in (ROOT / "genolong").rglob("*.py") if "commands" not in path.parts)


@pytest.mark.parametrize("path", library_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_library_code_never_imports_data_prep(path):
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    builders = {m for m in imported_modules(path, package) if m.split(".")[:2] in (["genolong", "data_prep"], ["data_prep"])}
    assert not builders, f"{path.relative_to(ROOT)} imports {sorted(builders)}; readers belong in genolong.datasets"


@pytest.mark.parametrize("path", sorted((ROOT / "data_prep").glob("*.py")), ids=lambda p: p.name)
def test_data_prep_never_imports_training(path):
    training = {m for m in imported_modules(path, "genolong.data_prep") if m.startswith(TRAINING)}
    assert not training, f"data_prep/{path.name} imports {sorted(training)}"
