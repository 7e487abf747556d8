"""The shipped promoter model's scan threshold: genome scans call at most 5% of real background genomes,
`scan` and `predict-promoter` print the fraction they called, and a caution line appears exactly when a
model with a species list calls more than 5% of a species it never saw."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from genolong.classifier.task_info import TASK_FILE, TaskInfo, default_promoter_model
from genolong.cli.main import main
from genolong.dna.sequence import read_fasta, write_fasta
from genolong.inference.called import CAUTION_FRACTION, caution_line, knows_species
from genolong.inference.scan.threshold import called_bp, lowest_threshold, read_scan
from genolong.inference.scan.tracks import CalledBases, RegionTrack
from genolong.tasks.task import get_task

MODEL = default_promoter_model()
# as inference commands load it: the spec of a directory that records none is its task's (the caution)
INFO = TaskInfo.read(MODEL)
INFO.inference = get_task(INFO.task).inference_spec(INFO.window_bp, None)
HUMAN = {"chr17.hg19.part.fa": 40_000, "MT-human_NC_012920.1.fa": 16_569}  # whole in tests/data


def test_called_bases_are_the_bp_of_the_bed_regions():
    rng = np.random.default_rng(0)
    called, bed = CalledBases(0.9), io.StringIO()
    regions = RegionTrack(bed, 0.9, "+", "promoter")
    for name in ("chrA", "chrB"):
        for chunk in range(3):  # chunks of bins, windows clipped at the chromosome's start
            starts = np.clip(np.arange(chunk * 2000, (chunk + 1) * 2000, 50) - 125, 0, None)
            scores = rng.random(len(starts)).astype(np.float32)
            scores[::7] = np.nan  # skipped bins
            for track in (called, regions):
                track.add(name, starts, starts + 300, scores)
    regions.close()
    lines = [line.split("\t") for line in bed.getvalue().splitlines()]
    assert len(lines) > 3 and called.bp == sum(int(end) - int(start) for _, start, end, *_ in lines)


def test_called_bases_are_cut_to_the_scanned_regions():
    segments = np.array([[1_000, 2_000], [5_000, 5_400]])
    bins = np.concatenate([np.arange(1_000, 2_000, 50), np.arange(5_000, 5_400, 50)])
    starts = bins + 25 - 150  # centred 300-bp windows reach 125 bp past each region
    called = CalledBases(0.5)
    called.add("c", starts, starts + 300, np.ones(len(bins)), segments)
    assert called.bp == 1_000 + 400  # all of the scanned bp, none outside
    half = CalledBases(0.5)
    half.add("c", starts, starts + 300, (bins < 1_500).astype(float), segments)
    assert half.bp == 1_500 + 125 - 1_000  # the called windows of the first region, cut at its start


def test_lowest_threshold_is_the_lowest_score_that_calls_at_most_the_target():
    rng = np.random.default_rng(1)
    scans = []
    for n in (200, 500):
        starts = np.arange(n) * 50
        scores = rng.random(n).astype(np.float32)
        scans.append(([("c", starts, starts + 300, scores, np.array([[0, n * 50 + 250]]))], n * 50))
    threshold = lowest_threshold(scans, 0.1)
    assert all(called_bp(chromosomes, threshold) <= 0.1 * bp for chromosomes, bp in scans)
    lower = threshold - 0.002
    assert any(called_bp(chromosomes, lower) > 0.1 * bp for chromosomes, bp in scans)


def test_shipped_model_records_its_scan_threshold_species_and_card():
    task = json.loads((MODEL / TASK_FILE).read_text())
    calibration = task["provenance"]["scan_calibration"]
    assert INFO.scan_threshold == calibration["threshold"] > INFO.threshold
    assert set(INFO.species) == {"Mus musculus", "Caenorhabditis elegans", "Saccharomyces cerevisiae"}
    readme = (MODEL / "README.md").read_text()
    assert f"**Scan threshold**: {INFO.scan_threshold:.4f}" in readme
    for genome in calibration["genomes"]:  # every background genome of ../shared/data, at most 5% called
        assert genome["called"] <= CAUTION_FRACTION
        assert f"`{genome['file']}` | {genome['what']} | {genome['role']} | {genome['scanned_bp']:,} | " \
               f"{genome['called']:.2%} |" in readme
    roles = {genome["role"] for genome in calibration["genomes"]}
    assert roles == {"calibration", "held out"}
    assert {p["file"] for p in calibration["promoters"]} >= {"Mouse_tata_dbtss.fa", "Arabidopsis_tata.fa"}


def test_species_are_matched_by_either_name():
    assert knows_species(INFO, "mouse") and knows_species(INFO, "Mus_musculus") and knows_species(INFO, "YEAST")
    assert not knows_species(INFO, "Homo sapiens") and not knows_species(INFO, None)
    assert caution_line(INFO, "mouse", 60, 100) is None  # a species the model saw
    assert caution_line(INFO, "human", 5, 100) is None  # 5% called: not more than the bound
    line = caution_line(INFO, "human", 6, 100)
    assert "never on human DNA" in line and "genolong promoter prepare" in line and "--negatives genomic" in line
    unlisted = TaskInfo(**{**INFO.__dict__, "species": {}})
    assert caution_line(unlisted, "human", 60, 100) is None  # no species recorded: nothing to compare with


@pytest.fixture(scope="module")
def human_scans(real_data, tmp_path_factory):
    """The two human genomes of tests/data scanned once by the shipped model at the scan defaults, HDF5."""
    work = tmp_path_factory.mktemp("human_scans")
    outputs = {}
    for name in HUMAN:
        genome = work / name
        genome.write_bytes((real_data / "genomes" / name).read_bytes())
        outputs[name] = work / f"{name}.h5"
        assert main(["scan", "--genome", str(genome), "--out", str(outputs[name]), "--accelerator", "cpu"]) == 0
    return outputs


def test_scan_calls_at_most_5_percent_of_the_human_genomes(human_scans):
    """Both are whole in tests/data: the fractions the card records reproduce (within 0.5 points: a window
    scoring next to the threshold may fall either side of it on another CPU)."""
    recorded = {g["file"]: g for g in INFO.provenance["scan_calibration"]["genomes"]}
    for name, path in human_scans.items():
        chromosomes, bp = read_scan(path)
        assert bp == HUMAN[name] == recorded[name]["scanned_bp"]
        fraction = called_bp(chromosomes, INFO.scan_threshold) / bp
        assert fraction <= CAUTION_FRACTION and abs(fraction - recorded[name]["called"]) <= 0.005, name
        at_record = called_bp(chromosomes, INFO.threshold) / bp
        assert abs(at_record - recorded[name]["called_at_record_threshold"]) <= 0.005, name


def test_scan_prints_the_called_fraction_and_cautions_only_out_of_depth(real_data, tmp_path, capsys):
    genome = tmp_path / "chrM.fa"
    genome.write_bytes((real_data / "genomes" / "MT-human_NC_012920.1.fa").read_bytes())
    regions = tmp_path / "first_4kb.bed"
    regions.write_text("HS#NC_012920.1\t0\t4000\n")  # the record name of this chrM

    def scan(*extra) -> list[str]:
        argv = ["scan", "--genome", str(genome), "--regions", str(regions), "--out", str(tmp_path / "t.bedGraph")]
        assert main([*argv, "--accelerator", "cpu", *extra]) == 0
        return capsys.readouterr().err.splitlines()

    lines = scan("--species", "human")  # the scan threshold: far below 5% (the whole chrM: 0 bp called)
    assert any(line.startswith("called ") and "of the 4,000 bp scored" in line and "at the scan threshold" in line
               for line in lines)
    assert not any(line.startswith("caution") for line in lines)
    lines = scan("--threshold", "0.001", "--bed", str(tmp_path / "all.bed"))  # calls it all; species not named
    assert "called 100.0% of the 4,000 bp scored (4,000 bp) at the threshold 0.001" in lines
    assert any(line.startswith("caution: ") and "name its species with --species" in line for line in lines)


def test_predict_promoter_prints_the_called_fraction_and_cautions_on_an_unseen_species(real_data, tmp_path, capsys):
    records = list(read_fasta(real_data / "promoters" / "Mouse_tata.fa"))[:24]
    fasta = tmp_path / "mouse.fa"
    write_fasta(fasta, [(r.name, r.sequence) for r in records])
    assert main(["predict-promoter", str(fasta), "--out", str(tmp_path / "p.tsv"), "--species", "mouse"]) == 0
    lines = capsys.readouterr().err.splitlines()
    called = [line for line in lines if line.startswith("called ")]
    assert len(called) == 1 and f"of the {24 * 251:,} bp scored" in called[0] and "record threshold" in called[0]
    assert not any(line.startswith("caution") for line in lines)
    fraction = float(called[0].split()[1].rstrip("%")) / 100
    assert fraction > CAUTION_FRACTION  # real promoters at the record threshold: most are called
    assert main(["predict-promoter", str(fasta), "--out", str(tmp_path / "q.tsv"), "--species", "Homo sapiens"]) == 0
    assert any(line.startswith("caution: ") and "never on Homo sapiens DNA" in line
               for line in capsys.readouterr().err.splitlines())


@pytest.mark.slow  # about a minute: 250 kbp of yeast and C. elegans
def test_scan_calls_at_most_5_percent_of_the_yeast_and_worm_cuts(real_data, tmp_path):
    from genolong.prep.genome_prepare import prepare_genome

    for name in ("yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa", "ce2chrX.fa.gz"):
        genome = prepare_genome(real_data / "genomes" / name, tmp_path / f"{name}.bgz", progress=False).path
        out = tmp_path / f"{name}.h5"
        assert main(["scan", "--genome", str(genome), "--out", str(out), "--accelerator", "cpu"]) == 0
        chromosomes, bp = read_scan(out)
        assert bp >= 100_000 and called_bp(chromosomes, INFO.scan_threshold) <= CAUTION_FRACTION * bp, name
