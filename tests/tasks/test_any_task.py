"""Every command serves every task: two tasks defined here alone, a 3-class task from a CSV and a
two-output regression task from BED regions on a genome, each through ``task prepare`` ->
``task finetune`` -> ``task predict`` -> ``scan`` -> ``score-variants`` -> ``explain`` -> ``embed`` on
the command line, with what inference needs read from the model's inference spec. The default run
takes one full chain per task (``--mode full``); LoRA and probe run the same chain under ``slow``.

Tiny models trained a few steps: the assertions are on shapes, columns, finite values and
identities that no float rounding can flip (softmax rows sum to 1, diff = alt - ref), not on accuracy.
"""

from __future__ import annotations

import ast
import csv
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest
import yaml
from helpers.classify import tiny_masked_lm

import genolong
from genolong.classifier.task_info import TASK_FILE, InferenceSpec, TaskInfo, default_promoter_model
from genolong.cli.main import main
from genolong.core.errors import ConfigError, UserError
from genolong.dna.sequence import read_fasta
from genolong.tasks.task import load_classifier

BASES = np.array(list("ACGT"))
MOTIFS = {"a": "GGGCGGGG", "b": "TATAAAAG", "c": "CACGTGAC"}
#: The window of the 3-class task's sequences (bp).
WINDOW = 60
#: The regression task's motif, counted in each window.
COUNTED = "CA"
#: Modules allowed to tell the two built-in tasks apart by name: their own task modules and the
#: commands that are their shortcuts.
NAMED_BY_TASK = {"tasks/promoter.py", "tasks/chromatin.py", "commands/promoter.py", "commands/chromatin.py"}
#: Modules that still dispatch on a built-in task's name and should ask the task instead: ``convert
#: --task``'s table of the commands that read a converted classifier. An entry that no longer
#: dispatches fails :func:`test_no_module_tells_the_tasks_apart_by_name`: remove it then.
STILL_NAMED_BY_TASK = {"convert/classification.py"}
#: The built-in tasks' names, which no other module may branch on.
TASK_NAMES = {"promoter", "chromatin"}


def names_a_task(node: ast.AST, constants: dict[str, ast.AST]) -> bool:
    """Whether ``node`` is a built-in task's name, a literal collection holding one (a dict by its
    keys), or a name or ``module.NAME`` bound to either in ``constants``."""
    if isinstance(node, ast.Constant):
        return node.value in TASK_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(names_a_task(element, constants) for element in node.elts)
    if isinstance(node, ast.Dict):  # keyed by a name (not by tuples of command words)
        return any(isinstance(key, (ast.Constant, ast.Name)) and names_a_task(key, constants) for key in node.keys)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name in constants and names_a_task(constants[name], {})


def module_constants(tree: ast.Module) -> dict[str, ast.AST]:
    """The values of ``tree``'s module-level ``NAME = value`` assignments."""
    return {target.id: statement.value for statement in tree.body if isinstance(statement, ast.Assign)
            for target in statement.targets if isinstance(target, ast.Name)}


def task_name_dispatch(source: str, constants: dict[str, ast.AST]) -> list[int]:
    """Lines of ``source`` that tell the built-in tasks apart by name: a comparison (``==``, ``!=``,
    ``in``) with a task's name, a collection of them or a constant bound to either, a dict keyed by a
    task's name, or a ``case`` on one. ``constants``: names bound in other modules, which
    ``source`` may import (its own module-level constants are added)."""
    tree = ast.parse(source)
    constants = constants | module_constants(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found = any(names_a_task(operand, constants) for operand in (node.left, *node.comparators))
        elif isinstance(node, ast.MatchValue):
            found = names_a_task(node.value, constants)
        else:
            found = isinstance(node, ast.Dict) and names_a_task(node, constants)
        if found:
            lines.append(node.lineno)
    return sorted(set(lines))


def preset(path: Path, mode: str) -> Path:
    """A micro model trained a few steps (seconds on a CPU)."""
    path.write_text(yaml.safe_dump({
        "task": "labelled", "max_len": 136, "mode": mode,
        "model": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
                  "pre_layer_norm": True, "hidden_dropout_prob": 0.0},
        "tokenizer": {"vocab_size": 22, "sample_bp": 20_000}, "patience": 10, "batch_size_eval": 64,
        "train": {"max_steps": 4, "val_every_steps": 2, "batch_size": 16, "learning_rate": 0.003, "warmup_steps": 1,
                  "log_every_steps": 2, "checkpoint_every_steps": 4, "val_windows": 1000, "seed": 0},
    }))
    return path


@pytest.fixture(scope="module")
def genome(real_data, tmp_path_factory) -> tuple[Path, str]:
    """The first 12 kb of the hg19 chr17 fragment of tests/data as ``chr17``, and its sequence (upper case)."""
    chr17 = next(iter(read_fasta(real_data / "genomes" / "chr17.hg19.part.fa"))).sequence[:12_000].upper()
    path = tmp_path_factory.mktemp("genome") / "chr17.fa"
    path.write_text(f">chr17\n{chr17}\n")
    return path, chr17


@pytest.fixture(scope="module")
def three_classes(tmp_path_factory) -> Path:
    """A 3-class task from a CSV: random 60-bp sequences, each holding its class's motif."""
    root = tmp_path_factory.mktemp("three_classes")
    rng = np.random.default_rng(3)
    lines = ["id,sequence,label"]
    for i in range(150):
        label = "abc"[i % 3]
        sequence = "".join(BASES[rng.integers(0, 4, WINDOW)])
        at = int(rng.integers(0, WINDOW - 8))
        lines.append(f"r{i},{sequence[:at]}{MOTIFS[label]}{sequence[at + 8:]},{label}")
    (root / "rows.csv").write_text("\n".join(lines) + "\n")
    assert main(["task", "prepare", "--table", str(root / "rows.csv"), "--out", str(root / "data")]) == 0
    return root / "data"


@pytest.fixture(scope="module")
def two_values(genome, tmp_path_factory) -> Path:
    """A two-output regression task from narrowPeak regions on the genome: each 100-bp window's GC
    content (signalValue) and count of CA (pValue)."""
    path, chr17 = genome
    root = tmp_path_factory.mktemp("two_values")
    lines = []
    for i, start in enumerate(range(100, 11_800, 80)):
        window = chr17[start + 25 - 50:start + 25 + 50]  # the window centred on the 50-bp region's midpoint
        gc = (window.count("G") + window.count("C")) / len(window)
        lines.append(f"chr17\t{start}\t{start + 50}\tr{i}\t0\t.\t{gc:.4f}\t{window.count(COUNTED)}\t-1\t-1")
    (root / "regions.narrowPeak").write_text("\n".join(lines) + "\n")
    assert main(["task", "prepare", "--regions", str(root / "regions.narrowPeak"), "--genome", str(path), "--window", "100",
                 "--label-column", "signalValue", "--label-column", "pValue", "--out", str(root / "data")]) == 0
    return root / "data"


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path) as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("##")), delimiter="\t"))


def finite(rows: list[dict[str, str]], columns: list[str]) -> np.ndarray:
    values = np.array([[float(row[c]) for c in columns] for row in rows])
    assert np.isfinite(values).all()
    return values


def chain(task_data: Path, genome: tuple[Path, str], out: Path, mode: str, capsys) -> dict:
    """The task through every command; returns what the test asserts on per task."""
    path, chr17 = genome
    run = out / "run"
    pretrained = []  # LoRA adapts a pretrained model: a random tiny masked-LM one
    if mode == "lora":
        tiny_masked_lm(out / "mlm", out / "mlm_tokenizer", positions=256)
        pretrained = ["--model", str(out / "mlm")]
    assert main(["task", "finetune", "--data", str(task_data), "--out", str(run), *pretrained,
                 "--config", str(preset(out / "micro.yaml", mode))]) == 0
    model = run / "model"
    info = TaskInfo.read(model)
    names = info.label_names
    capsys.readouterr()

    records = out / "records.fa"
    starts = (1000, 3000, 5000)
    records.write_text("".join(f">w{s}\n{chr17[s:s + info.window_bp]}\n" for s in starts))
    assert main(["task", "predict", str(records), "--model", str(model), "--out", str(out / "predict.tsv")]) == 0
    predicted = read_tsv(out / "predict.tsv")
    assert list(predicted[0]) == ["record", "id", "length", "windows", *names, "error"]
    assert [(row["record"], row["id"], row["windows"]) for row in predicted] == [
        ("1", "w1000", "1"), ("2", "w3000", "1"), ("3", "w5000", "1")]

    (out / "regions.bed").write_text("chr17\t1000\t1600\n")
    tracks = out / "scan.bw"
    assert main(["scan", "--genome", str(path), "--model", str(model), "--regions", str(out / "regions.bed"),
                 "--out", str(tracks), str(out / "scan.h5")]) == 0
    with h5py.File(out / "scan.h5") as h5:
        scan = h5["scores"][:]
        assert [p.decode() for p in h5["profiles"][:]] == names and h5.attrs["stride"] == info.inference.scan_stride
    assert scan.shape == (600 // info.inference.scan_stride, len(names)) and np.isfinite(scan).all()
    for column, name in enumerate(names):  # a bigWig per output, the same values as the HDF5 matrix
        with pyBigWig.open(str(out / f"scan.{name}.bw")) as bigwig:
            values = np.array([v for _, _, v in bigwig.intervals("chr17")])
        assert np.allclose(values, scan[:, column], rtol=1e-6)

    variants = out / "variants.tsv"
    positions = (1100, 1130, 1201)
    variants.write_text("".join(f"chr17\t{p}\t{chr17[p - 1]}\t{'A' if chr17[p - 1] != 'A' else 'C'}\tv{p}\n"
                                for p in positions))
    assert main(["score-variants", "--vcf", str(variants), "--genome", str(path), "--model", str(model),
                 "--out", str(out / "effects.tsv")]) == 0
    effects = read_tsv(out / "effects.tsv")
    assert len(effects) == len(positions) * len(names) and {row["profile"] for row in effects} == set(names)

    assert main(["explain", "--model", str(model), str(records), "--out", str(out / "explain"),
                 "--output", names[-1], "--ism-window", "12", "--gradients", "input-x-gradient",
                 "--logo-width", "12"]) == 0
    target = out / "explain" / f"{len(names) - 1}_{names[-1]}"
    assert sorted(p.name for p in (out / "explain").iterdir() if p.is_dir()) == [target.name]
    ism, gradients = (np.load(target / f"{what}.npz")["arr_0"] for what in ("ism", "gradients"))
    assert ism.shape == gradients.shape == (3, 4, 12) and np.isfinite(ism).all() and np.isfinite(gradients).all()

    assert main(["embed", str(records), "--model", str(model), "--out", str(out / "embeddings.h5")]) == 0
    with h5py.File(out / "embeddings.h5") as h5:
        embeddings = h5["embeddings"][:]
    hidden = json.loads((model / "config.json").read_text())["hidden_size"]  # 32; LoRA's pretrained model: 16
    assert embeddings.shape == (3, 1, hidden) and np.isfinite(embeddings).all()
    return {"info": info, "predicted": predicted, "scan": scan, "effects": effects, "ism": ism}


MODES = ["full", pytest.param("lora", marks=pytest.mark.slow), pytest.param("probe", marks=pytest.mark.slow)]


@pytest.mark.parametrize("mode", MODES)
def test_a_three_class_task_through_every_command(three_classes, genome, tmp_path, mode, capsys):
    result = chain(three_classes, genome, tmp_path, mode, capsys)
    info = result["info"]
    assert info.label_names == ["a", "b", "c"]
    assert (info.inference.activation, info.inference.threshold, info.inference.variant_effect) == (
        "softmax", "none", "probability")
    assert info.inference.scan_stride == WINDOW // 2 and not info.inference.called_fraction_caution
    probabilities = finite(result["predicted"], ["a", "b", "c"])
    assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)  # one probability per class
    assert np.allclose(result["scan"].sum(axis=1), 1, atol=1e-4) and (result["scan"] >= 0).all()
    scores = finite(result["effects"], ["p_ref", "p_alt", "diff", "abs_diff", "logit_diff", "combined"])
    assert ((scores[:, :2] >= 0) & (scores[:, :2] <= 1)).all()
    assert np.abs(result["ism"]).max() <= 1  # differences of a class's probability
    model = tmp_path / "run" / "model"
    task = json.loads((model / TASK_FILE).read_text())
    task["inference"]["variant_effect"] = "logit"  # a spec may compare logits instead
    (model / TASK_FILE).write_text(json.dumps(task))
    assert main(["score-variants", "--vcf", str(tmp_path / "variants.tsv"), "--genome", str(genome[0]), "--model",
                 str(model), "--out", str(tmp_path / "logits.tsv")]) == 0
    logits = finite(read_tsv(tmp_path / "logits.tsv"), ["logit_ref", "logit_alt", "diff", "abs_diff"])
    assert np.allclose(logits[:, 2], logits[:, 1] - logits[:, 0], rtol=1e-4, atol=1e-5)
    capsys.readouterr()
    regions = tmp_path / "regions.bed"
    assert main(["scan", "--genome", str(genome[0]), "--model", str(tmp_path / "run" / "model"), "--regions",
                 str(regions), "--out", str(tmp_path / "again.bw"), "--bed", str(tmp_path / "called.bed")]) == 2
    assert "have no threshold" in capsys.readouterr().err
    assert not (tmp_path / "again.bw").exists() and not (tmp_path / "called.bed").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_two_output_regression_task_through_every_command(two_values, genome, tmp_path, mode, capsys):
    result = chain(two_values, genome, tmp_path, mode, capsys)
    info = result["info"]
    assert info.label_names == ["signalValue", "pValue"] and info.threshold is None
    assert (info.inference.activation, info.inference.threshold, info.inference.variant_effect) == (
        "identity", "none", "value")
    finite(result["predicted"], ["signalValue", "pValue"])
    values = finite(result["effects"], ["ref", "alt", "diff", "abs_diff"])
    assert np.allclose(values[:, 2], values[:, 1] - values[:, 0], rtol=1e-4, atol=1e-5)  # diff = alt - ref
    assert np.allclose(values[:, 3], np.abs(values[:, 2]))


def test_a_directory_without_a_spec_gets_its_tasks(tmp_path):
    """The shipped promoter model records no inference spec: the promoter task declares it."""
    assert "inference" not in json.loads((default_promoter_model() / TASK_FILE).read_text())
    spec = load_classifier(default_promoter_model(), device="cpu").info.inference
    assert (spec.activation, spec.threshold, spec.variant_effect) == ("sigmoid", "probability", "probability")
    assert spec.scan_stride == 50 and spec.called_fraction_caution


def test_a_spec_that_does_not_fit_the_model_is_refused(tmp_path):
    shutil.copytree(default_promoter_model(), tmp_path / "model")
    info = TaskInfo.read(tmp_path / "model")
    info.inference = InferenceSpec("softmax", 50, "none", "probability")  # the model has one sigmoid
    info.write(tmp_path / "model")
    with pytest.raises(UserError, match="inference.activation softmax does not fit a model of problem_type"):
        load_classifier(tmp_path / "model", device="cpu")


def test_no_module_tells_the_tasks_apart_by_name():
    package = Path(genolong.__file__).parent
    modules = {str(path.relative_to(package)): path.read_text() for path in sorted(package.rglob("*.py"))}
    constants = {name: value for source in modules.values()
                 for name, value in module_constants(ast.parse(source)).items() if names_a_task(value, {})}
    found = [f"{path}:{line}: {source.splitlines()[line - 1].strip()}" for path, source in modules.items()
             if path not in NAMED_BY_TASK | STILL_NAMED_BY_TASK for line in task_name_dispatch(source, constants)]
    assert found == []
    assert all(task_name_dispatch(modules[path], constants) for path in STILL_NAMED_BY_TASK)


@pytest.mark.parametrize("source", [
    'if info.task == "promoter":\n    pass',
    "if 'chromatin' != task:\n    pass",
    'if task in ("promoter", "chromatin"):\n    pass',
    'x = info.task != "chromatin"',
    'x = task not in ["chromatin"]',
    'run = {"promoter": run_promoter, "chromatin": run_chromatin}[task]',
    'run = {"chromatin": run_chromatin}.get(task, run_any)',
    'PROMOTER = "promoter"\nif task == PROMOTER:\n    pass',
    'BUILT_IN = ("promoter", "chromatin")\nx = task in BUILT_IN',
    'from genolong.tasks.names import TASK\nx = name == TASK',
    'from genolong.tasks import names\nx = names.TASK == name',
    'match task:\n    case "promoter":\n        pass',
], ids=["==", "reversed !=", "in tuple", "!= expression", "not in list", "dict key", "dict get", "constant",
        "constant tuple", "imported constant", "module attribute", "match case"])
def test_the_check_finds_each_form_of_dispatch_by_name(source):
    imported = {"TASK": ast.Constant("promoter")}  # a constant of another module of the package
    assert task_name_dispatch(source, imported), source


def test_the_check_lets_names_be_stated():
    for source in ['name = "promoter"', 'run(task="chromatin")', 'NAME = "promoter"\nprint(NAME)',
                   'names = ("promoter", "chromatin")', 'if task == other:\n    pass']:
        assert task_name_dispatch(source, {}) == [], source


def test_a_spec_that_is_not_one_is_a_one_line_error(tmp_path):
    spec = {"activation": "tanh", "scan_stride": 10, "threshold": "none", "variant_effect": "value"}
    (tmp_path / TASK_FILE).write_text(json.dumps({
        "format": "genolong-classifier/1", "task": "labelled", "window_bp": 20, "min_bp": 20, "max_len": 24,
        "label_names": ["y"], "inference": spec}))
    with pytest.raises(UserError, match=f"{TASK_FILE}: .*inference: activation must be one of sigmoid") as error:
        TaskInfo.read(tmp_path)
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="variant_effect must be one of probability, logit, value"):
        InferenceSpec("identity", 10, "none", "difference")
