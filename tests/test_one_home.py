"""Each runtime rule has one home: which rank a process is (``runtime/launch.py``) and whether CUDA is there
(``runtime/devices.py``). A launcher variable read, or a CUDA query made, anywhere else fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import genolong

PACKAGE_ROOT = Path(genolong.__file__).parent
#: The launchers' variables that place a process (torchrun, SLURM, Lightning's launcher).
LAUNCH_VARIABLES = {"RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID", "SLURM_LOCALID",
                    "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"}
#: ``torch.cuda`` questions about this machine's devices.
CUDA_QUERIES = {"is_available", "device_count"}
HOME = PACKAGE_ROOT / "runtime"


def rule_breaches(paths) -> list[str]:
    """``file:line: what`` for each launcher variable named and each CUDA query made in ``paths``."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(Path(path).read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in LAUNCH_VARIABLES:
                found.append((str(path), node.lineno, f"reads the launcher variable {node.value}"))
            elif (isinstance(node, ast.Attribute) and node.attr in CUDA_QUERIES and isinstance(node.value, ast.Attribute)
                  and node.value.attr == "cuda"):
                found.append((str(path), node.lineno, f"asks torch.cuda.{node.attr}"))
    return [f"{path}:{line}: {what}" for path, line, what in sorted(found)]


def library_files_outside_the_home() -> list[Path]:
    return [path for path in PACKAGE_ROOT.rglob("*.py") if HOME not in path.parents]


def test_the_check_finds_a_planted_rank_read_and_cuda_query(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\nimport torch\n\nrank = int(os.environ.get('LOCAL_RANK', 0))\n"
                       "gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0\n")
    assert rule_breaches([planted]) == [f"{planted}:4: reads the launcher variable LOCAL_RANK",
                                        f"{planted}:5: asks torch.cuda.device_count",
                                        f"{planted}:5: asks torch.cuda.is_available"]


def test_ranks_and_cuda_are_asked_only_in_the_runtime_package():
    assert rule_breaches(library_files_outside_the_home()) == []
