"""The package's shape: imports point one way, no cycles, small modules.

The import graph is read from the source (every ``import`` statement, including those
inside functions, which would otherwise hide a cycle), not from what happens to be loaded.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import genolong

PACKAGE_ROOT = Path(genolong.__file__).parent
#: ``genolong/prep/`` sits at the top of the repository and installs as ``genolong.prep``.
DATA_PREP_ROOT = PACKAGE_ROOT.parent / "data_prep"
MAX_LINES = 400
#: Packages the data builders must not depend on: they train, run models or parse commands.
TRAINING = ("genolong.tasks", "genolong.cli.commands", "genolong.model", "genolong.attention", "genolong.inference",
            "genolong.experiments.bench", "genolong.classifier", "genolong.convert", "genolong.experiments.suites")
#: The package order: a package imports only the packages before it (and itself). ``core`` is every
#: module at the top of ``genolong/`` and the data packages ``resources`` and ``configs``.
PACKAGE_ORDER = ("core", "dna", "attention", "config", "model", "datasets", "classifier", "convert", "evaluation",
                 "tasks", "inference", "bench", "benchmark", "data_prep", "commands")
CORE_PACKAGES = ("resources", "configs")
ARCHITECTURE_PAGE = PACKAGE_ROOT.parent / "docs" / "architecture.md"


def module_files() -> dict[str, Path]:
    """Every module of the installed package: dotted name -> source file."""
    files = {}
    for root, prefix in ((PACKAGE_ROOT, "genolong"), (DATA_PREP_ROOT, "genolong.prep")):
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join((prefix, *parts))] = path
    return files


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from package import submodule`` depends on the submodule; any other name on ``module``.
            candidates = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                          for alias in node.names]
        else:
            continue
        found.update(candidate for candidate in candidates if candidate in known and candidate != name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def package_of(module: str) -> str:
    """The package of the order that ``module`` belongs to: ``genolong.training.finetune`` -> ``tasks``;
    ``genolong``, ``genolong.core.errors`` and the modules of ``CORE_PACKAGES`` -> ``core``. A package
    absent from the order is returned by name (and fails :func:`test_every_package_has_a_place`)."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in CORE_PACKAGES:
        return "core"
    if parts[1] in PACKAGE_ORDER or len(parts) > 2:
        return parts[1]
    return "core" if (PACKAGE_ROOT / f"{parts[1]}.py").is_file() else parts[1]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages (:func:`package_of`): package -> the other packages it imports."""
    packages: dict[str, set[str]] = {package_of(name): set() for name in graph}
    for name, targets in graph.items():
        packages[package_of(name)].update(package_of(target) for target in targets)
    for package, targets in packages.items():
        targets.discard(package)
    return packages


def imports_against_the_order(graph: dict[str, set[str]], order=PACKAGE_ORDER) -> list[str]:
    """Every ``module -> module`` import whose target's package comes after (not before) the
    importer's in ``order``."""
    rank = {package: position for position, package in enumerate(order)}
    return sorted(
        f"{name} ({package_of(name)}) -> {target} ({package_of(target)})"
        for name, targets in graph.items()
        for target in targets
        if rank[package_of(target)] > rank[package_of(name)]
    )


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (each is a cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_imports_resolve_absolute_relative_and_nested_forms(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os.path\nfrom .kmers import BLOCK\n\ndef f():\n    from genolong.prep import cache\n")
    known = {"genolong.prep.kmers", "genolong.prep", "genolong.prep.cache", "genolong.prep.m"}
    assert imported_modules("genolong.prep.m", source, known) == {"genolong.prep.kmers", "genolong.prep.cache"}
    source.write_text("from genolong.prep import kmers, SOURCES\n")
    assert imported_modules("genolong.prep.m", source, known) == {"genolong.prep.kmers", "genolong.prep"}


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "genolong.core.errors" in graph["genolong.cli.main"]
    assert all(target.startswith("genolong") for targets in graph.values() for target in targets)


def test_cycle_detection_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]


def test_no_import_cycles():
    cycles = strongly_connected(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(cycle) for cycle in cycles)


def test_package_cycle_detection_finds_a_planted_cycle():
    """Modules without a cycle among them can still tie their packages into one."""
    graph = {"genolong.tasks.a": {"genolong.inference.b"}, "genolong.inference.b": set(),
             "genolong.inference.c": {"genolong.tasks.d"}, "genolong.tasks.d": set(), "genolong.core.errors": set()}
    assert strongly_connected(graph) == []
    assert strongly_connected(package_graph(graph)) == [["inference", "tasks"]]


def test_the_order_check_finds_a_planted_upward_import():
    graph = {"genolong.core.errors": set(), "genolong.dna.sequence": {"genolong.core.errors"},
             "genolong.config.schema": {"genolong.model.heads", "genolong.dna.sequence"}, "genolong.model.heads": set()}
    assert imports_against_the_order(graph) == ["genolong.config.schema (config) -> genolong.model.heads (model)"]
    assert package_of("genolong.resources.genomes") == package_of("genolong.runtime.precision") == "core"


def test_every_package_has_a_place_in_the_order():
    assert {package_of(name) for name in module_files()} == set(PACKAGE_ORDER)


def test_no_package_level_cycles():
    cycles = strongly_connected(package_graph(import_graph()))
    assert not cycles, "package cycles: " + "; ".join(" <-> ".join(cycle) for cycle in cycles)


def test_no_import_against_the_package_order():
    offenders = imports_against_the_order(import_graph())
    assert not offenders, f"imports against the order {' -> '.join(PACKAGE_ORDER)}: {offenders}"


def test_the_documented_order_is_the_tested_one():
    """docs/architecture.md lists the packages once, in order, each as a bold name at the start of an item."""
    page = ARCHITECTURE_PAGE.read_text()
    section = page[page.index("## The packages"):page.index("## Outside the package")]
    documented = [name.strip("`/") for name in re.findall(r"^- \*\*([^*]+)\*\*", section, flags=re.M)]
    assert [name.lower().split()[0] for name in documented] == list(PACKAGE_ORDER)


def test_only_commands_use_the_data_builders():
    """Training, evaluation and inference read datasets through genolong.datasets; the
    builders in data_prep are called by commands only (and data_prep never imports them back)."""
    graph = import_graph()
    offenders = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if not name.startswith(("genolong.prep", "genolong.cli.commands"))
        for target in targets
        if target.startswith("genolong.prep")
    )
    assert not offenders, offenders
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("genolong.prep")
        for target in targets
        if target.startswith(TRAINING)
    )
    assert not upward, upward


@pytest.mark.parametrize("name", sorted(module_files()))
def test_modules_stay_small(name):
    lines = len(module_files()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by job (limit {MAX_LINES})"


def test_every_package_is_in_the_wheel():
    """pyproject.toml lists the packages explicitly (data_prep and configs install under
    genolong): a subpackage missing there works in an editable install and is absent from a wheel."""
    pyproject = (PACKAGE_ROOT.parent / "pyproject.toml").read_text()
    listed = pyproject[pyproject.index("packages = ["):]
    listed = set(re.findall(r'"(genolong[\w.]*)"', listed[: listed.index("]")]))
    packages = {".".join(path.parent.relative_to(PACKAGE_ROOT.parent).parts) for path in PACKAGE_ROOT.rglob("__init__.py")}
    assert packages - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
