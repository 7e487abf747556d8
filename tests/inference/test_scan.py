"""`genolong scan` on real C. elegans sequence with the shipped promoter model: bins and windows,
tokenisation (per-base and BPE tokenizers), tracks read back with pyBigWig against
`predict-promoter`, N runs, region edges, resume, bad input, and the 2-process (gloo DDP) run
byte-identical to one process. Window and token lengths come from the model's TaskInfo, so the
tests hold for whichever promoter model ships."""

from __future__ import annotations

import csv
import gzip
import signal
import sys
from pathlib import Path

import numpy as np
import pyBigWig
import pytest
import torch
from helpers.classify import random_classifier, tiny_tokenizer
from helpers.ranks import run_on_two_ranks

from genolong.classifier.directory import (
    Classifier,
    StrandAveraged,
    TaskInfo,
    TokenEncoder,
    default_promoter_model,
)
from genolong.cli.main import main
from genolong.dna.genome import Genome
from genolong.dna.sequence import clean, write_fasta
from genolong.dna.tokenizer import (
    ALPHABET,
    N_RUN_POWERS,
    SPECIAL_TOKENS,
    TokenizerTrainConfig,
    load_tokenizer,
    train_tokenizer,
)
from genolong.inference.scan import parts
from genolong.inference.scan.plan import ScanPlan, merge_intervals, read_regions, whole_chromosomes
from genolong.inference.scan.windows import WindowBatches, WindowEncoder, is_per_base

N_RUN = (5_000, 7_500)  # an assembly gap written into the real sequence


def ce_slice(real_data: Path, length: int) -> str:
    """The first ``length`` bp of the real C. elegans chrX (ce2), read no further than needed."""
    lines = []
    with gzip.open(real_data / "genomes" / "ce2chrX.fa.gz", "rt") as handle:
        assert next(handle).startswith(">chrX")
        while sum(map(len, lines)) < length:
            lines.append(next(handle).strip())
    return clean("".join(lines)[:length])


@pytest.fixture(scope="module")
def genome(real_data, tmp_path_factory) -> Path:
    """12 kbp of real chrX with a 2.5-kbp N run, a second real chromosome (the next 3 kbp) and
    one shorter than the model's window, as bgzip with .fai/.gzi (``genolong genome prepare``)."""
    from genolong.prep.genome_prepare import prepare_genome

    sequence = ce_slice(real_data, 15_000)
    x = sequence[: N_RUN[0]] + "N" * (N_RUN[1] - N_RUN[0]) + sequence[N_RUN[1] : 12_000]
    work = tmp_path_factory.mktemp("scan_genome")
    write_fasta(work / "raw.fa", [("chrX", x), ("chrII", sequence[12_000:]), ("chrS", sequence[:100])])
    return prepare_genome(work / "raw.fa", work / "ce.fa.bgz", progress=False).path


@pytest.fixture(scope="module")
def classifier() -> Classifier:
    return Classifier.load(default_promoter_model(), device="cpu")


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict:
    """A per-base tokenizer (no merges: each token one base or an N run) and a 64-token BPE one."""
    from genolong.resources import sample_genome

    work = tmp_path_factory.mktemp("scan_tokenizers")
    fixed = len(SPECIAL_TOKENS) + len(ALPHABET) + N_RUN_POWERS
    train_tokenizer(sample_genome(), work / "per_base", TokenizerTrainConfig(vocab_size=fixed, sample_bp=20_000),
                    show_progress=False)
    return {"per_base": load_tokenizer(work / "per_base"), "bpe": load_tokenizer(tiny_tokenizer(work / "bpe"))}


def centred_window(sequence: str, bin_start: int, window: int, stride: int = 50) -> str:
    """The ``window`` bp scored for the bin at ``bin_start``: centred on the bin, kept inside the
    sequence (computed here independently of :class:`ScanPlan`)."""
    start = min(max(bin_start + stride // 2 - window // 2, 0), len(sequence) - window)
    return sequence[start : start + window]


def scan(tmp_path: Path, genome: Path, *extra: str, name: str = "track") -> dict[str, Path]:
    out = {kind: tmp_path / f"{name}.{kind}" for kind in ("bw", "bedGraph")}
    argv = ["scan", "--genome", str(genome), "--out", str(out["bw"]), str(out["bedGraph"]),
            "--bed", str(tmp_path / f"{name}.bed"), "--skipped", str(tmp_path / f"{name}.skipped.bed"), *extra]
    assert main(argv) == 0
    return out | {"bed": tmp_path / f"{name}.bed", "skipped": tmp_path / f"{name}.skipped.bed"}


def predict_promoter(tmp_path: Path, windows: list[str]) -> np.ndarray:
    """`predict-promoter` on each window written as one FASTA record (computed independently)."""
    fasta, table = tmp_path / "windows.fa", tmp_path / "windows.tsv"
    write_fasta(fasta, [(f"w{i}", w) for i, w in enumerate(windows)])
    assert main(["predict-promoter", str(fasta), "--out", str(table)]) == 0
    with open(table) as handle:
        rows = csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t")
        return np.array([float(row["probability"]) for row in rows])


def assert_bins_equal_predict_promoter(tmp_path: Path, sequence: str, values: np.ndarray, bins: list[int]) -> None:
    """The track's value at each bin start == `predict-promoter` on the model's window centred on
    the 50-bp bin (kept inside the chromosome), to the TSV's 4 decimals."""
    window = TaskInfo.read(default_promoter_model()).window_bp
    expected = predict_promoter(tmp_path, [centred_window(sequence, b, window) for b in bins])
    np.testing.assert_allclose(values[bins], expected, rtol=0, atol=5.1e-5)


# -- plan: bins, windows, regions ------------------------------------------------------------------
def test_bins_are_scored_by_the_window_centred_on_them():
    plan = ScanPlan([("c", 30, np.array([[0, 10], [20, 30]]))], window=11, stride=4, batch_bins=2)
    starts, ends = plan.bins(0, 0, plan.chromosomes[0].bins)
    assert starts.tolist() == [0, 4, 8, 20, 24, 28] and ends.tolist() == [4, 8, 10, 24, 28, 30]
    # centre of bin [4, 8) is base 6 = 1 + 11 // 2; at the ends the window stays inside [0, 30)
    assert plan.window_starts(0, starts).tolist() == [0, 1, 5, 17, 19, 19]
    assert plan.batches == 3 and [plan.batch(i).lo for i in range(3)] == [0, 2, 4]


def test_stride_larger_than_window_is_refused():
    with pytest.raises(Exception, match="larger than the model's window"):
        ScanPlan(whole_chromosomes({"c": 100}), window=10, stride=11, batch_bins=4)


def test_bed_regions_are_sorted_and_merged(genome, tmp_path):
    bed = tmp_path / "r.bed"
    bed.write_text("track name=x\nchrII\t500\t900\nX\t300\t400\nchrX\t100\t200\nchrX\t150\t350\nchrX\t350\t360\n")
    targets = read_regions(bed, Genome(genome))
    assert [(name, segments.tolist()) for name, _, segments in targets] == [
        ("chrX", [[100, 400]]), ("chrII", [[500, 900]])]
    assert merge_intervals([(5, 6), (1, 2), (2, 3)]).tolist() == [[1, 3], [5, 6]]


# -- tokenisation and the model's fast path ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["per_base", "bpe"])
def test_window_tokens_equal_the_tokenizer(real_data, tokenizers, kind):
    """Per-base: the numpy lookup for windows without N; BPE: the tokenizer for every window.
    Either way the ids and the central crop are :class:`TokenEncoder`'s."""
    tokenizer = tokenizers[kind]
    assert is_per_base(tokenizer) == (kind == "per_base")
    assert (WindowEncoder(tokenizer, 320).lookup is not None) == (kind == "per_base")
    sequence = ce_slice(real_data, 5_000)
    windows = [sequence[i : i + 251] for i in range(0, 4_000, 397)]
    windows[3] = windows[3][:100] + "N" * 40 + windows[3][140:]  # an N run: the tokenizer's path
    windows[5] = "N" * 251
    bases = np.frombuffer("".join(windows).encode(), dtype=np.uint8).reshape(len(windows), 251)
    for rows in (bases, bases[[0, 1, 2]]):  # mixed batch, and one without N
        fast = WindowEncoder(tokenizer, 320)(rows)
        reference = TokenEncoder(tokenizer, 320)([r.tobytes().decode() for r in rows])
        assert all(torch.equal(fast[k], reference[k]) for k in ("input_ids", "attention_mask"))
    cropped = WindowEncoder(tokenizer, 40)(bases[:2])["input_ids"]  # the central 38 tokens
    assert cropped.shape == (2, 40)
    assert torch.equal(cropped, TokenEncoder(tokenizer, 40)(windows[:2])["input_ids"])


def test_first_token_only_equals_the_full_forward(classifier):
    from genolong.classifier.scoring import supports_first_token_only
    from genolong.inference.loop import ScanModule

    length, vocab = classifier.info.max_len, classifier.model.config.vocab_size
    ids = torch.randint(5, vocab, (6, length), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = classifier.tokenizer.cls_token_id, classifier.tokenizer.sep_token_id
    mask = torch.ones_like(ids)
    mask[1, length * 3 // 4 :], ids[1, length * 3 // 4 :] = 0, classifier.tokenizer.pad_token_id
    module = ScanModule(classifier.model, rc=False, columns=None)
    assert supports_first_token_only(classifier.model)
    with torch.inference_mode():
        full = torch.sigmoid(classifier.model(input_ids=ids, attention_mask=mask).logits)
        torch.testing.assert_close(module.probabilities(ids, mask), full, rtol=0, atol=2e-6)


def test_batch_scores_do_not_depend_on_the_thread_count(genome, classifier):
    """What makes a scan over several processes (1 thread each) equal to one with 2 threads."""
    from genolong.inference.loop import ScanModule

    info = classifier.info
    plan = ScanPlan(whole_chromosomes({"chrX": 12_000}), window=info.window_bp, stride=50, batch_bins=32)
    dataset = WindowBatches(plan, genome, WindowEncoder(classifier.tokenizer, info.max_len), list(range(plan.batches)),
                            rc=False, max_n_fraction=0.5)
    items = [dataset[i] for i in (0, 3, 4)]  # plain, and batches with N-rich and padded windows
    assert not items[2]["scored"].all() and not items[2]["attention_mask"].all()
    for rows in (1, 5, 7, 10):  # few windows: the sizes whose matrix products depend on the thread count
        scored = torch.arange(len(items[0]["scored"])) < rows
        items.append({**items[0], "scored": scored, "input_ids": items[0]["input_ids"][:rows],
                      "attention_mask": items[0]["attention_mask"][:rows]})
    module = ScanModule(classifier.model, rc=False, columns=None)
    scores = {}
    threads = torch.get_num_threads()
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            with torch.inference_mode():
                scores[count] = [module.predict_step(item, 0)["scores"] for item in items]
    finally:
        torch.set_num_threads(threads)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(scores[1], scores[2], strict=True))


# -- end to end on real sequence ---------------------------------------------------------------------
def test_scan_tracks_equal_predict_promoter_on_the_same_windows(genome, classifier, tmp_path):
    out = scan(tmp_path, genome)
    threshold, window = classifier.info.threshold, classifier.info.window_bp
    sequence = {name: Genome(genome).fetch(name, 0, length) for name, length in Genome(genome).chromosomes.items()}
    with pyBigWig.open(str(out["bw"])) as bw:
        assert bw.chroms() == {"chrX": 12_000, "chrII": 3_000, "chrS": 100}
        intervals = bw.intervals("chrX")
        values = np.array(bw.values("chrX", 0, 12_000))
        assert bw.intervals("chrS") is None  # shorter than the window: no value
    # every bin has a value except those whose centred window is mostly N
    starts = np.array([s for s, _, _ in intervals])
    assert (np.diff(starts) >= 50).all() and intervals[-1][1] == 12_000
    mostly_n = [b for b in range(0, 12_000, 50) if centred_window(sequence["chrX"], b, window).count("N") > window / 2]
    assert sorted(set(range(0, 12_000, 50)) - set(starts.tolist())) == mostly_n
    assert np.isnan(values[6_000:6_500]).all()
    # bedGraph holds the same intervals and values
    lines = [line.split("\t") for line in out["bedGraph"].read_text().splitlines()[1:]]
    chrx = [(int(s), int(e), float(v)) for c, s, e, v in lines if c == "chrX"]
    assert [(s, e) for s, e, _ in chrx] == [(s, e) for s, e, _ in intervals]
    np.testing.assert_allclose([v for *_, v in chrx], [v for *_, v in intervals], rtol=1e-5)
    # sampled bins (chromosome edges, both sides of the N run, anywhere) == predict-promoter on their window
    picks = [0, 50, 4_850, 4_900, 7_600, 7_650, 11_900, 11_950, *range(700, 11_000, 2_100)]
    assert_bins_equal_predict_promoter(tmp_path, sequence["chrX"], values, [b for b in picks if b in set(starts)])
    # skipped bins are listed with the reason; called regions are windows above the threshold
    skipped = [line.split("\t") for line in out["skipped"].read_text().splitlines()]
    assert ["chrS", "0", "100", "shorter_than_window"] in skipped
    assert all(reason == "mostly_N" and N_RUN[0] - window // 2 <= int(s) and int(e) <= N_RUN[1] + window // 2
               for c, s, e, reason in skipped if c == "chrX")
    for c, s, e, name, score, strand in (line.split("\t") for line in out["bed"].read_text().splitlines()):
        assert c in ("chrX", "chrII") and name == "promoter" and strand == "+" and int(score) >= 1000 * threshold - 1
        assert (int(e) - int(s)) >= window


def test_rc_averages_both_strands_of_each_window(genome, classifier, tmp_path):
    out = tmp_path / "rc.bedGraph"
    assert main(["scan", "--genome", str(genome), "--chromosomes", "chrII", "--rc", "--out", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    sequence = Genome(genome).fetch("chrII", 0, 3_000)
    bins = [0, 1_500, 2_950]
    windows = [centred_window(sequence, b, classifier.info.window_bp) for b in bins]
    expected = StrandAveraged(classifier).probabilities(windows)[:, 0]
    observed = [float(rows[b // 50][3]) for b in bins]
    np.testing.assert_allclose(observed, expected, rtol=1e-5, atol=2e-6)  # bedGraph keeps 6 digits


@pytest.mark.slow  # ~1 Mbp through the shipped model: minutes on the shared 2-core machine
def test_one_megabase_of_real_sequence(shared_data, tmp_path):
    from genolong.prep.genome_prepare import prepare_genome

    sequence = ce_slice(shared_data, 1_000_000)
    write_fasta(tmp_path / "raw.fa", [("chrX", sequence)])
    genome = prepare_genome(tmp_path / "raw.fa", tmp_path / "ce1m.fa.bgz", progress=False).path
    out = scan(tmp_path, genome, "--batch-size", "256")
    with pyBigWig.open(str(out["bw"])) as bw:
        assert bw.chroms() == {"chrX": 1_000_000} and len(bw.intervals("chrX")) == 20_000
        values = np.array(bw.values("chrX", 0, 1_000_000))
    bins = [0, 999_950, *np.random.default_rng(0).choice(np.arange(50, 999_950, 50), 40, replace=False).tolist()]
    assert_bins_equal_predict_promoter(tmp_path, sequence, values, bins)
    assert len(out["bedGraph"].read_text().splitlines()) == 20_001


def test_regions_score_like_the_whole_genome_and_edges_are_exact(genome, tmp_path):
    whole = scan(tmp_path, genome, "--chromosomes", "X", name="whole")
    bed = tmp_path / "targets.bed"
    bed.write_text("chrX\t11000\t11990\nchrX\t0\t1000\nchrX\t4800\t5300\n")  # unsorted; ends at odd places
    regional = scan(tmp_path, genome, "--regions", str(bed), name="regions")
    with pyBigWig.open(str(whole["bw"])) as a, pyBigWig.open(str(regional["bw"])) as b:
        assert b.chroms() == {"chrX": 12_000}
        got = b.intervals("chrX")
        assert got[0][:2] == (0, 50) and got[-1][:2] == (11_950, 11_990)  # last bin cut at the region end
        assert {(s, e) for s, e, _ in got} <= {(s, min(e, 11_990)) for s, e, _ in a.intervals("chrX")}
        for start, _, value in got:  # a bin's window does not depend on the region's cut
            assert value == pytest.approx(a.values("chrX", start, start + 1)[0], abs=2e-6)


def test_an_interrupted_scan_resumes_without_recomputing_finished_chromosomes(genome, tmp_path, monkeypatch, capsys):
    reference = scan(tmp_path, genome, name="reference")
    original = parts.RankWriter.write
    written: list[int] = []

    def interrupt_on_the_second_chromosome(self, batch_index, scores):
        if self.work.plan.batch(batch_index).chromosome == 1:
            raise KeyboardInterrupt  # as Ctrl+C would
        original(self, batch_index, scores)

    argv = ["scan", "--genome", str(genome), "--out", str(tmp_path / "again.bw")]
    monkeypatch.setattr(parts.RankWriter, "write", interrupt_on_the_second_chromosome)
    handler = signal.getsignal(signal.SIGINT)
    try:
        assert main(argv) == 130
    finally:
        signal.signal(signal.SIGINT, handler)  # Lightning ignores SIGINT while it shuts down
    assert "genolong scan: interrupted; the same command resumes" in capsys.readouterr().err
    assert not (tmp_path / "again.bw").exists()
    assert [p.name for p in tmp_path.glob(".again.bw.scan-*/0*")] == ["00000.rank0of1.f32"]
    monkeypatch.setattr(parts.RankWriter, "write", lambda self, b, s: (written.append(b), original(self, b, s)))
    assert main(argv) == 0
    assert written and min(written) > 0  # chromosome 0's batches were not recomputed
    assert (tmp_path / "again.bw").read_bytes() == reference["bw"].read_bytes()
    assert not list(tmp_path.glob(".again.bw.scan-*"))


# -- bad input: exit 2, one line, nothing written ----------------------------------------------------------
@pytest.mark.parametrize(("bed_text", "message"), [
    ("chrX\t0\t100\nchr9\t0\t100\n", r"regions.bed:2: chromosome 'chr9' is not in the genome"),
    ("chrX\t0\t100\nchrX\t11900\t12001\n", r"regions.bed:2: region chrX:11900-12001 is outside chrX"),
    ("chrX\tzero\t100\n", r"regions.bed:1: not a BED line"),
])
def test_bad_regions_name_the_line(genome, tmp_path, capsys, bed_text, message):
    bed = tmp_path / "regions.bed"
    bed.write_text(bed_text)
    assert main(["scan", "--genome", str(genome), "--regions", str(bed), "--out", str(tmp_path / "t.bw")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and pytest.importorskip("re").search(message, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["regions.bed"]


def test_gzip_genome_and_large_stride_are_refused(real_data, genome, classifier, tmp_path, capsys):
    gz, window = real_data / "genomes" / "ce2chrX.fa.gz", classifier.info.window_bp
    cases = [(["--genome", str(gz)], "genolong genome prepare"),
             (["--genome", str(genome), "--stride", str(window + 1)], f"larger than the model's window of {window}"),
             (["--genome", str(genome), "--profiles", "x"], "--profiles chooses among a model's outputs")]
    for argv, message in cases:
        assert main(["scan", *argv, "--out", str(tmp_path / "t.bw")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and message in err
    assert not list(tmp_path.iterdir())


# -- many processes --------------------------------------------------------------------------------------
def test_rank_parts_merge_into_the_single_process_bytes(tmp_path):
    """Batches computed by 3 ranks (b % 3), merged: the same file as one rank writes."""
    plan = ScanPlan([("a", 1000, np.array([[0, 1000]])), ("b", 90, np.array([[0, 90]]))], window=20, stride=10,
                    batch_bins=7)
    scores = {b: np.random.default_rng(b).random((plan.batch(b).hi - plan.batch(b).lo, 2), dtype=np.float32)
              for b in range(plan.batches)}
    merged = {}
    for world in (1, 3):
        work = parts.WorkDirectory(tmp_path / f"w{world}", plan, 2, world)
        for rank in range(world):
            writer = parts.RankWriter(work, rank)
            for b in range(rank, plan.batches, world):
                writer.write(b, scores[b])
        assert work.pending() == []
        for chromosome in range(2):
            work.merge(chromosome)
        merged[world] = [work.merged_path(c).read_bytes() for c in range(2)]
        assert not list(work.path.glob("*rank*"))
    assert merged[1] == merged[3]
    assert merged[1][1] == np.concatenate([scores[b] for b in plan.batch_range(1)]).tobytes()


@pytest.mark.slow  # two fresh processes importing torch and Lightning: ~80 s on the loaded 2-core machine
def test_two_cpu_processes_write_the_same_bytes_as_one(genome, tmp_path):
    """`--devices 2` on CPU: Lightning launches a second process, gloo DDP, batches shared b % 2."""
    outputs = {}
    for devices in ("1", "2"):
        out = [tmp_path / f"d{devices}.bw", tmp_path / f"d{devices}.bedGraph", tmp_path / f"d{devices}.bed"]
        argv = ["scan", "--genome", str(genome), "--out", str(out[0]), str(out[1]), "--bed", str(out[2]),
                "--accelerator", "cpu", "--devices", devices, "--batch-size", "32"]
        if devices == "1":  # in this process, on all its threads
            assert main(argv) == 0
        else:
            run_on_two_ranks(argv, tmp_path)
        outputs[devices] = [path.read_bytes() for path in out]
    assert outputs["1"] == outputs["2"]


# -- chromatin models: HDF5 matrix and per-profile bigWigs ------------------------------------------------
def test_chromatin_model_writes_a_matrix_and_one_bigwig_per_profile(genome, tmp_path):
    import h5py

    names = ["K562|DNase|None", "HepG2|CTCF|None", "GM12878|H3K4me3|None"]
    model = random_classifier(tmp_path / "chromatin", tiny_tokenizer(tmp_path / "tok"), task="chromatin",
                              window_bp=200, min_bp=200, label_names=names)
    base = ["scan", "--model", str(model), "--genome", str(genome), "--chromosomes", "chrII", "--stride", "100"]
    assert main([*base, "--out", str(tmp_path / "all.h5")]) == 0
    assert main([*base, "--out", str(tmp_path / "t.bw"), "--profiles", names[2], "1"]) == 0
    with h5py.File(tmp_path / "all.h5") as h5:
        scores, starts = h5["scores"][:], h5["start"][:]
        assert scores.shape == (30, 3) and [p.decode() for p in h5["profiles"]] == names
        assert starts.tolist() == list(range(0, 3000, 100)) and (h5["end"][:] - starts == 100).all()
    classifier = Classifier.load(model, device="cpu")
    sequence = Genome(genome).fetch("chrII", 0, 3000)
    picks = [0, 1_500, 2_900]
    windows = [centred_window(sequence, b, 200, stride=100) for b in picks]
    np.testing.assert_allclose(scores[[b // 100 for b in picks]], classifier.probabilities(windows), atol=2e-6)
    for column, slug in ((2, "GM12878_H3K4me3_None"), (1, "HepG2_CTCF_None")):
        with pyBigWig.open(str(tmp_path / f"t.{slug}.bw")) as bw:
            np.testing.assert_array_equal(np.array(bw.values("chrII", 0, 3000))[::100], scores[:, column])


def test_a_pseudo_terminal_without_a_size_shows_the_progress_bar(genome, tmp_path, monkeypatch):
    """Under ``script`` or a CI runner, stderr is a terminal that reports 0 columns."""
    import fcntl
    import os
    import pty

    from genolong.core.progress import terminal_columns

    master, slave = pty.openpty()
    fcntl.fcntl(master, fcntl.F_SETFL, os.O_NONBLOCK)
    with os.fdopen(slave, "w") as terminal:
        assert terminal_columns(terminal) == 0
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main(["scan", "--genome", str(genome), "--chromosomes", "chrII", "--out",
                     str(tmp_path / "t.bedGraph")]) == 0
        terminal.flush()
        shown = os.read(master, 1 << 16).decode()
    os.close(master)
    assert "ce.fa.bgz: 100%|" in shown and "3.00k/3.00k" in shown, shown
