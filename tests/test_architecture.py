"""The package's shape: imports point one way, no cycles, small modules, and the cuts hold.

The import graph is read from the source (every ``import`` statement, including those inside
functions, which would otherwise hide a cycle, and every string that names a module or a class
in one, such as ``"genolong.model.vcc.VCCEncoder"``, which importlib would resolve), not from what
happens to be loaded.
"""

from __future__ import annotations

import ast
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import genolong

PACKAGE_ROOT = Path(genolong.__file__).parent
REPO = PACKAGE_ROOT.parent
MAX_LINES = 400
#: The package order: a package imports only the packages before it (and itself). ``core`` also
#: holds ``genolong/__init__.py`` and the shipped data of :data:`CORE_PACKAGES`.
PACKAGE_ORDER = ("core", "runtime", "dna", "attention", "config", "model", "datasets", "classifier", "convert",
                 "evaluation", "tasks", "training", "inference", "experiments", "prep", "cli")
#: Data packages: ``genolong/resources/`` and ``configs/`` (at the top of the repository, installed as
#: ``genolong.configs``).
CORE_PACKAGES = ("resources", "configs")
#: Imports the order allows that the cut forbids: inference never trains; the data builders never
#: build, convert or run a model.
FORBIDDEN_PACKAGES = {
    "inference": ("training",),
    "prep": ("attention", "model", "classifier", "convert", "training", "inference", "experiments"),
}
#: Libraries that are torch or import it.
TORCH_LIBRARIES = ("torch", "lightning", "pytorch_lightning", "transformers", "peft", "captum", "torchmetrics")
#: Libraries each package must not import: core starts without torch (the CLI parses arguments at
#: once); task definitions know no Lightning; only the CLI parses arguments.
FORBIDDEN_LIBRARIES = {package: ("argparse",) for package in PACKAGE_ORDER if package != "cli"}
FORBIDDEN_LIBRARIES["core"] += TORCH_LIBRARIES
FORBIDDEN_LIBRARIES["tasks"] += ("lightning", "pytorch_lightning")
ARCHITECTURE_PAGE = REPO / "docs" / "architecture.md"
#: A string that names a genolong module or something in one (a trailing dot: an f-string's head).
DOTTED_NAME = re.compile(r"genolong(?:\.[A-Za-z_]\w*)+\.?")


def module_files() -> dict[str, Path]:
    """Every module of the installed package: dotted name -> source file."""
    files = {"genolong.configs": REPO / "configs" / "__init__.py"}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        parts = path.relative_to(PACKAGE_ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(("genolong", *parts))] = path
    return files


def _named_module(text: str, known: set[str]) -> str | None:
    """The longest known module that ``text`` (a dotted name) names or names something in; None
    for the bare package (``"genolong.encoder.embeddings.token.weight"`` is a weight's key)."""
    parts = text.rstrip(".").split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports anywhere in its body, or
    names in a string (of another package: a string naming its own package's modules is a
    registry that loads them)."""
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
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED_NAME.fullmatch(node.value):
            # Within a package, a name in a string is a registry loading its own modules, by design.
            named = _named_module(node.value, known)
            candidates = [named] if named and package_of(named) != package_of(name) else []
        else:
            continue
        found.update(candidate for candidate in candidates if candidate in known and candidate != name)
    return found


def external_imports(path: Path) -> set[str]:
    """The top-level names of the libraries (standard or not) the module at ``path`` imports anywhere."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    found.discard("genolong")
    return found


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def package_of(module: str) -> str:
    """The package of the order that ``module`` belongs to: ``genolong.training.finetune`` -> ``training``;
    ``genolong`` and the modules of ``CORE_PACKAGES`` -> ``core``; ``genolong.__main__`` -> ``cli``. A package absent from the order is
    returned by name (and fails :func:`test_every_package_has_a_place_in_the_order`)."""
    parts = module.split(".")
    if module == "genolong.__main__":  # ``python -m genolong``: the command line
        return "cli"
    if len(parts) == 1 or parts[1] in CORE_PACKAGES:
        return "core"
    return parts[1]


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


def forbidden_package_imports(graph: dict[str, set[str]], forbidden=FORBIDDEN_PACKAGES) -> list[str]:
    """Every ``module -> module`` import from a package into one that ``forbidden`` keeps it from."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if package_of(target) in forbidden.get(package_of(name), ()))


def forbidden_library_imports(libraries: dict[str, set[str]], forbidden=FORBIDDEN_LIBRARIES) -> list[str]:
    """Every ``module -> library`` import (``libraries``: module -> the libraries it imports) that
    ``forbidden`` keeps the module's package from."""
    return sorted(f"{name} -> {library}" for name, imported in libraries.items() for library in imported
                  if library in forbidden.get(package_of(name), ()))


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
    source.write_text("import os.path\nfrom .splits import SPLITS\n\ndef f():\n    from genolong.prep import cache\n")
    known = {"genolong.prep.splits", "genolong.prep", "genolong.prep.cache", "genolong.prep.m"}
    assert imported_modules("genolong.prep.m", source, known) == {"genolong.prep.splits", "genolong.prep.cache"}
    source.write_text("from genolong.prep import splits, SOURCES\n")
    assert imported_modules("genolong.prep.m", source, known) == {"genolong.prep.splits", "genolong.prep"}


def test_a_class_path_written_as_a_string_counts_as_an_import(tmp_path):
    source = tmp_path / "vcc.py"
    source.write_text('"""Docs naming genolong.model.vcc.VCCEncoder in prose."""\nencoder = "genolong.model.vcc.VCCEncoder"\n'
                      'key = "genolong.encoder.embeddings.token.weight"\nrun = f"genolong.cli.commands.{1}"\n')
    known = {"genolong.model.vcc", "genolong.model", "genolong.attention.vcc", "genolong.cli.commands"}
    graph = {"genolong.attention.vcc": imported_modules("genolong.attention.vcc", source, known),
             "genolong.model.vcc": set(), "genolong.cli.commands": set()}
    assert graph["genolong.attention.vcc"] == {"genolong.model.vcc", "genolong.cli.commands"}
    assert imports_against_the_order(graph, order=("attention", "model", "cli")) == [
        "genolong.attention.vcc (attention) -> genolong.cli.commands (cli)",
        "genolong.attention.vcc (attention) -> genolong.model.vcc (model)"]


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
             "genolong.config.schema": {"genolong.model.heads", "genolong.dna.sequence"}, "genolong.model.heads": set(),
             "genolong.tasks.task": {"genolong.cli.outputs"}, "genolong.cli.outputs": set()}
    assert imports_against_the_order(graph) == ["genolong.config.schema (config) -> genolong.model.heads (model)",
                                                "genolong.tasks.task (tasks) -> genolong.cli.outputs (cli)"]
    assert package_of("genolong.resources.genomes") == package_of("genolong.configs") == package_of("genolong") == "core"


def test_every_package_has_a_place_in_the_order():
    assert {package_of(name) for name in module_files()} == set(PACKAGE_ORDER)


def test_no_package_level_cycles():
    cycles = strongly_connected(package_graph(import_graph()))
    assert not cycles, "package cycles: " + "; ".join(" <-> ".join(cycle) for cycle in cycles)


def test_no_import_against_the_package_order():
    offenders = imports_against_the_order(import_graph())
    assert not offenders, f"imports against the order {' -> '.join(PACKAGE_ORDER)}: {offenders}"


def test_the_forbidden_import_check_finds_a_planted_one():
    graph = {"genolong.inference.loop": {"genolong.training.common", "genolong.runtime.devices"},
             "genolong.training.common": set(), "genolong.runtime.devices": set()}
    assert forbidden_package_imports(graph) == ["genolong.inference.loop -> genolong.training.common"]


def test_inference_never_trains_and_builders_never_run_models():
    offenders = forbidden_package_imports(import_graph())
    assert not offenders, offenders


def test_the_library_check_finds_planted_imports():
    libraries = {"genolong.core.memory": {"os", "torch"}, "genolong.tasks.task": {"lightning", "numpy"},
                 "genolong.model.heads": {"argparse", "torch"}, "genolong.cli.arguments": {"argparse"}}
    assert forbidden_library_imports(libraries) == ["genolong.core.memory -> torch", "genolong.model.heads -> argparse",
                                                    "genolong.tasks.task -> lightning"]


def test_argparse_only_in_the_cli_no_torch_in_core_no_lightning_in_tasks():
    offenders = forbidden_library_imports({name: external_imports(path) for name, path in module_files().items()})
    assert not offenders, offenders


def test_core_imports_without_torch():
    """Nor through a library of its own: importing every core module loads no torch."""
    core = [name for name in module_files() if package_of(name) == "core"]
    code = f"import importlib, sys\nfor name in {core!r}:\n    importlib.import_module(name)\nprint('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_documented_order_is_the_tested_one():
    """docs/architecture.md lists the packages once, in order, each as a bold name at the start of an item."""
    page = ARCHITECTURE_PAGE.read_text()
    section = page[page.index("## The packages"):page.index("## Outside the package")]
    documented = [name.strip("`/") for name in re.findall(r"^- \*\*([^*]+)\*\*", section, flags=re.M)]
    assert [name.lower().split()[0] for name in documented] == list(PACKAGE_ORDER)


@pytest.mark.parametrize("name", sorted(module_files()))
def test_modules_stay_small(name):
    lines = len(module_files()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by job (limit {MAX_LINES})"


def test_every_folder_of_modules_is_a_package():
    """A folder of modules without ``__init__.py`` works from a checkout but is a namespace package,
    which tools that read packages (mkdocstrings, the order test) treat differently."""
    folders = {path.parent for path in PACKAGE_ROOT.rglob("*.py")}
    missing = sorted(str(folder.relative_to(REPO)) for folder in folders if not (folder / "__init__.py").is_file())
    assert not missing, f"add __init__.py to {missing}"


def test_the_wheel_holds_every_folder_of_the_package_with_its_data():
    """setup.py's package list covers every folder under ``genolong/`` that holds files, shipped data
    included (the default promoter model has no module): an editable install works without it, a
    wheel would lack the folder."""
    installed = set(runpy.run_path(str(REPO / "setup.py"), run_name="setup")["PACKAGES"])
    folders = {path.parent for path in PACKAGE_ROOT.rglob("*") if path.is_file() and "__pycache__" not in path.parts}
    missing = sorted(".".join(folder.relative_to(PACKAGE_ROOT.parent).parts) for folder in folders)
    assert [name for name in missing if name not in installed] == []
    assert {"genolong.resources.models.promoter", "genolong.configs"} <= installed
