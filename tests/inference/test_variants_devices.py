"""`genolong score-variants` on more than one rank: chunks shared round-robin, parts assembled by rank 0
into the bytes one process writes."""

from __future__ import annotations

import gzip
from collections import Counter

import h5py
import numpy as np
import pytest
import torch
from helpers.classify import random_classifier, tiny_tokenizer
from helpers.ranks import run_on_two_ranks
from helpers.variants import write_vcf

from genolong.cli.main import main
from genolong.dna.genome import Genome
from genolong.inference.labels import label_class
from genolong.inference.variants.loop import VariantChunks, VariantPartWriter
from genolong.inference.variants.output import writer_for
from genolong.inference.variants.reader import VariantFile
from genolong.inference.variants.run import PartialRun
from genolong.inference.variants.scoring import ClassifierEffects
from genolong.inference.variants.windows import WindowBuilder
from genolong.resources import sample_genome
from genolong.tasks.task import load_classifier

GENOME = str(sample_genome())
PROFILES = ["GM12878|CTCF|None", "HepG2|CTCF|None", "K562|DNase|None"]
WINDOW = 1000
DATE = {"SOURCE_DATE_EPOCH": "1795000000"}  # the provenance date of every run here


@pytest.fixture(scope="module")
def chromatin_model(tmp_path_factory):
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")
    return random_classifier(tmp_path_factory.mktemp("m") / "chromatin", tokenizer, task="chromatin",
                             window_bp=WINDOW, min_bp=WINDOW, label_names=PROFILES, max_len=96)


def arguments(vcf, model, out, *options) -> list[str]:
    return ["score-variants", "--vcf", str(vcf), "--genome", GENOME, "--model", str(model), "--out", str(out),
            "--chunk-size", "3", "--batch-size", "4", "--accelerator", "cpu", *options]


def data_rows(path) -> list[str]:
    with gzip.open(path, "rt") as handle:
        return [line for line in handle if not line.startswith("##")]


def test_chunks_shared_by_two_ranks_assemble_to_the_rows_of_one(chromatin_model, tmp_path):
    """Each rank's VariantChunks takes chunks i % 2 == rank; written in any order, the parts assemble
    to the single-process output."""
    vcf = write_vcf(tmp_path / "in.vcf")
    assert main(arguments(vcf, chromatin_model, tmp_path / "one.tsv.gz")) == 0
    builder = WindowBuilder(Genome(GENOME), WINDOW)
    effects = ClassifierEffects(load_classifier(chromatin_model, device="cpu"), [0, 1, 2], batch_size=4)
    out = tmp_path / "two.tsv.gz"
    writer = writer_for(out, effects.labels, [label_class(PROFILES, i) for i in range(3)], effects.score_names)
    run = PartialRun(out, {"test": 1})
    run.prepare()
    parts = VariantPartWriter(run, writer, effects.labels, None, progress=False, description="")
    shares = {}
    for rank in (1, 0):  # rank 1 first: the order parts are written in does not matter
        chunks = VariantChunks(VariantFile(vcf), builder, 3, run, rank, 2)
        shares[rank] = []
        for chunk in chunks:
            shares[rank].append(chunk.index)
            assert parts.write((chunk, effects.score(chunk.windows))) == chunk.counts["alleles"]
        for chunk in VariantChunks(VariantFile(vcf), builder, 3, run, rank, 2):  # now all done: the empty item
            assert chunk.index == -1
        assert chunks.chunks == 4
    assert shares == {0: [0, 2], 1: [1, 3]}
    writer.assemble([run.part(i, writer.part_suffix) for i in range(4)], {"test": 1})
    assert run.counts(4) == {"alleles": 10, "flagged: padded": 1, "scored": 8,
                             "skipped: REF differs from the genome": 1, "skipped: symbolic allele": 1}
    assert data_rows(out) == data_rows(tmp_path / "one.tsv.gz")


def test_a_resumed_run_skips_the_finished_chunks_on_any_number_of_ranks(chromatin_model, tmp_path):
    vcf = write_vcf(tmp_path / "in.vcf")
    run = PartialRun(tmp_path / "out.tsv", {"test": 1})
    run.prepare()
    run.commit(1, Counter(alleles=3))  # chunk 1 finished by an interrupted run (of any number of ranks)
    builder = WindowBuilder(Genome(GENOME), WINDOW)
    shares = [[c.index for c in VariantChunks(VariantFile(vcf), builder, 3, run, rank, 2)] for rank in (0, 1)]
    assert shares == [[0, 2], [3]]
    run.prepare()  # the same identity again: kept
    assert run.done(1)
    PartialRun(tmp_path / "out.tsv", {"test": 2}).prepare()  # other settings: started afresh
    assert not run.done(1)


def test_gzip_members_carry_no_time_or_name(chromatin_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", DATE["SOURCE_DATE_EPOCH"])
    vcf = write_vcf(tmp_path / "in.vcf")
    outputs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        assert main(arguments(vcf, chromatin_model, "out.tsv.gz")) == 0
        outputs.append((tmp_path / name / "out.tsv.gz").read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0][4:8] == b"\0\0\0\0"  # first member: mtime 0
    assert not outputs[0][3] & gzip.FNAME


@pytest.mark.slow  # a second process importing torch and Lightning: ~40 s per format on the loaded 2-core machine
@pytest.mark.parametrize(("suffix", "precision"), [(".tsv.gz", "32"), (".h5", "32"), (".h5", "bf16")])
def test_two_cpu_processes_write_the_same_bytes_as_one(chromatin_model, tmp_path, monkeypatch, suffix, precision):
    """`--devices 2` on CPU: Lightning launches a second process (gloo DDP), chunks shared i % 2; at the same
    precision, float32 or bf16 autocast."""
    vcf = write_vcf(tmp_path / "in.vcf")
    annotate = ["--annotate-vcf", "annotated.vcf.gz"] if suffix == ".tsv.gz" else []
    for devices in ("1", "2"):
        (tmp_path / devices).mkdir()
        argv = arguments(vcf, chromatin_model, f"out{suffix}", "--devices", devices, "--rc", "--precision", precision,
                         *annotate)
        if devices == "1":  # in this process, on all its threads
            monkeypatch.chdir(tmp_path / devices)
            monkeypatch.setenv("SOURCE_DATE_EPOCH", DATE["SOURCE_DATE_EPOCH"])
            assert main(argv) == 0
        else:
            assert "10 alleles, 8 scored" in run_on_two_ranks(argv, tmp_path / devices, DATE)
    written = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "2").iterdir())
    assert written == ["annotated.vcf.gz", "out.tsv.gz"] if annotate else ["out.h5"]
    for name in written:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name
    if suffix == ".h5":
        with h5py.File(tmp_path / "2" / "out.h5") as h5:
            assert h5["diff"].shape == (8, 3) and np.isfinite(h5["diff"][:]).all()


@pytest.mark.parametrize("option", [["--accelerator", "gpu"], ["--devices", "0"], ["--devices", "two"]])
def test_devices_this_machine_lacks_are_one_line_before_any_work(chromatin_model, tmp_path, capsys, option):
    if option == ["--accelerator", "gpu"] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    vcf = write_vcf(tmp_path / "in.vcf")
    assert main(arguments(vcf, chromatin_model, tmp_path / "out.tsv", *option)) == 2
    err = capsys.readouterr().err.strip()
    assert option[0] in err and len(err.splitlines()) == 1, err
    assert [p.name for p in tmp_path.iterdir()] == ["in.vcf"]
