"""The command line starts at once: ``--version``, every ``--help`` and argument errors load no heavy library.

Checked on the modules a fresh interpreter holds afterwards, not on a timing (which depends on the
machine); ``benchmarks/startup.py`` measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Libraries that take seconds to import; only the command that uses one may load it.
HEAVY = ("torch", "transformers", "lightning", "sklearn", "h5py", "pyBigWig", "pysam", "matplotlib")

SCRIPT = """
import contextlib, io, json, sys
import genolong.cli.main as cli
codes = {}
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        codes[" ".join(argv)] = cli.main(argv)
heavy = sorted(name for name in json.loads(sys.argv[2]) if name in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy}))
"""


def test_help_version_and_argument_errors_load_no_heavy_library():
    from genolong.cli.main import build_parser

    groups = build_parser()._subparsers._group_actions[0].choices
    runs = [["--version"], ["--help"], *([name, "--help"] for name in groups),
            ["scan", "--genome", "g.fa", "--out", "x.bw", "--stride", "0"],  # an argument error
            ["predict-promoter"], ["no-such-command"]]
    result = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(runs), json.dumps(HEAVY)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], f"loaded by --help/--version/argument errors: {report['heavy']}"
    codes = report["codes"]
    assert codes["--version"] == 0 and codes["--help"] == 0
    assert all(codes[f"{name} --help"] == 0 for name in groups)
    assert codes["scan --genome g.fa --out x.bw --stride 0"] == 2
    assert codes["predict-promoter"] == 2 and codes["no-such-command"] == 2
