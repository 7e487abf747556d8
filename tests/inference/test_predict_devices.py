"""`predict-promoter` / `chromatin predict` on more than one rank: batches shared round-robin, rank 0
replays them into the files one process writes."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.classify import random_classifier, tiny_tokenizer
from helpers.ranks import run_on_two_ranks

from genolong.classifier.directory import Classifier
from genolong.classifier.records import group_by_record, iter_windows, score_windows
from genolong.cli.main import main
from genolong.dna.sequence import FastaRecord, read_fasta, write_fasta
from genolong.inference.predict.loop import ReplayedScorer, WindowBatches

PROFILES = ["GM12878|CTCF|None", "HepG2|CTCF|None", "K562|DNase|None"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")
    root = tmp_path_factory.mktemp("models")
    return {
        "promoter": random_classifier(root / "promoter", tokenizer, task="promoter", window_bp=251, min_bp=251,
                                      label_names=["promoter"], threshold=0.5),
        "chromatin": random_classifier(root / "chromatin", tokenizer, task="chromatin", window_bp=200, min_bp=200,
                                       label_names=PROFILES),
    }


@pytest.fixture(scope="module")
def fasta(real_data, tmp_path_factory):
    """Real mouse promoters: 251-bp records, one too short, and two joined into a record scanned in windows."""
    records = [r for _, r in zip(range(9), read_fasta(real_data / "promoters" / "Mouse_tata.fa"), strict=False)]
    joined = FastaRecord("joined", records[0].sequence + records[1].sequence + records[2].sequence)
    short = FastaRecord("short", records[3].sequence[:120])
    path = tmp_path_factory.mktemp("fa") / "in.fa"
    write_fasta(path, [*records[3:6], joined, short, *records[6:]])
    return path


def flat(stream) -> list[tuple[str, int, list[float] | None]]:
    return [(item.name, getattr(item, "start", -1), None if p is None else p.tolist())
            for _, pairs in stream for item, p in pairs]


def test_batches_of_two_ranks_replay_into_the_stream_of_one(models, fasta, tmp_path):
    classifier = Classifier.load(models["chromatin"], device="cpu")

    def windows():
        return iter_windows(read_fasta(fasta, unique_names=False), 200, 100, 200)

    one = flat(group_by_record(score_windows(windows(), classifier, 4)))
    shares = {}
    for rank in (1, 0):
        shares[rank] = []
        with open(tmp_path / f"rank{rank}.f32", "wb") as handle:
            for item in WindowBatches(windows, 4, rank, 2):
                shares[rank].append(item["batch"])
                handle.write(classifier.probabilities(item["sequences"]).astype(np.float32).tobytes())
    assert shares == {0: [0, 2, 4], 1: [1, 3]}  # 6 records x 2 windows + 7 of "joined": batches 4, 4, 4, 4, 3
    replay = ReplayedScorer(tmp_path, 2, len(PROFILES))
    assert flat(group_by_record(score_windows(windows(), replay, 4))) == one
    assert list(WindowBatches(windows, 4, 5, 6)) == [{"batch": -1, "sequences": []}]  # a rank without batches


def test_several_ranks_need_an_output_file(models, fasta, capsys):
    assert main(["predict-promoter", str(fasta), "--model", str(models["promoter"]), "--accelerator", "cpu",
                 "--devices", "2"]) == 2
    assert "need --out" in capsys.readouterr().err


@pytest.mark.slow  # a second process importing torch and Lightning: ~20 s per command on the loaded 2-core machine
@pytest.mark.parametrize(("task", "precision"), [("promoter", "32"), ("chromatin", "32"), ("chromatin", "bf16")])
def test_two_cpu_processes_write_the_same_bytes_as_one(models, fasta, tmp_path, task, precision):
    """`--devices 2` on CPU: Lightning launches a second process (gloo DDP), batches shared b % 2; at the
    same precision, float32 or bf16 autocast."""
    outputs = {}
    for devices in ("1", "2"):
        out = [tmp_path / f"d{devices}.tsv"]
        argv = [f"predict-{task}", str(fasta), "--model", str(models[task]), "--out", str(out[0]), "--rc",
                "--batch-size", "4", "--stride", "100", "--accelerator", "cpu", "--devices", devices,
                "--precision", precision]
        if task == "promoter":
            out += [tmp_path / f"d{devices}.windows.tsv", tmp_path / f"d{devices}.bed"]
            argv += ["--windows", str(out[1]), "--bed", str(out[2])]
        if devices == "1":  # in this process, on all its threads
            assert main(argv) == 0
        else:
            assert "windows scored" in run_on_two_ranks(argv, tmp_path)
        outputs[devices] = [path.read_bytes() for path in out]
    assert outputs["1"] == outputs["2"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no parts left
