"""Preparing tracks holds one window at a time: its peak memory does not grow with the number of windows."""

from __future__ import annotations

import numpy as np

from genolong.cli.main import main
from genolong.core.memory import proc_status_mb, reset_peak_memory

INPUT_BP, TARGET_BP, BIN_BP = 65536, 32768, 32


def _inputs(tmp_path, windows: int):
    """A contig holding ``windows`` regions one target apart, a bigWig with a value per bin over it, and
    the regions BED (train / valid / test in turn)."""
    folder = tmp_path / f"w{windows}"
    folder.mkdir()
    length = windows * TARGET_BP + INPUT_BP
    rng = np.random.default_rng(windows)
    bases = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, length)].tobytes().decode()
    lines = "\n".join(bases[i:i + 80] for i in range(0, length, 80))
    (folder / "genome.fa").write_text(f">chr1\n{lines}\n")
    import pyBigWig

    bigwig = pyBigWig.open(str(folder / "a.bw"), "w")
    bigwig.addHeader([("chr1", length)])
    bigwig.addEntries("chr1", 0, values=rng.gamma(0.5, 2.0, length // BIN_BP).tolist(), span=BIN_BP, step=BIN_BP)
    bigwig.close()
    starts = INPUT_BP // 2 - TARGET_BP // 2 + TARGET_BP * np.arange(windows)
    (folder / "regions.bed").write_text("".join(
        f"chr1\t{s}\t{s + TARGET_BP}\tr{i}\t0\t+\t{('train', 'valid', 'test')[i % 3]}\n" for i, s in enumerate(starts)))
    return folder


def _peak_mb(folder) -> float:
    """The rise of the process's resident-memory high-water mark while preparing ``folder``'s windows."""
    before = reset_peak_memory()
    code = main(["task", "prepare", "--genome", str(folder / "genome.fa"), "--bigwig", str(folder / "a.bw"),
                 "--regions", str(folder / "regions.bed"), "--split-column", "7", "--input-bp", str(INPUT_BP),
                 "--target-bp", str(TARGET_BP), "--bin-bp", str(BIN_BP), "--out", str(folder / "out")])
    assert code == 0
    return proc_status_mb("VmHWM") - before


def test_prepare_peak_memory_does_not_grow_with_windows(tmp_path, capsys):
    few, many = _inputs(tmp_path, 12), _inputs(tmp_path, 240)
    _peak_mb(_inputs(tmp_path, 3))  # imports and first-use caches
    small, large = _peak_mb(few), _peak_mb(many)
    # holding every window would add 228 x 64 KiB of bases alone (14 MiB); streaming adds nothing
    assert "windows train 80, valid 80, test 80" in capsys.readouterr().out
    assert large - small < 6, (small, large)
