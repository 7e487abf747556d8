"""Training options and checkpoint files a user gets wrong: one line and exit 2 before any work
(bad learning rate, devices, accelerator, precision, steps, batch size, prediction device), and
checkpoint writes that cannot leave a half-written file."""

from __future__ import annotations

from io import FileIO

import pytest
import torch
from helpers.classify import promoter_dataset

from genolong.cli.main import main


@pytest.fixture(scope="module")
def promoters(real_data, tmp_path_factory):
    return promoter_dataset(real_data, tmp_path_factory.mktemp("promoters") / "data")


@pytest.mark.parametrize(
    "options, message",
    [
        (["--learning-rate", "nan"], "learning_rate must be a finite number"),
        (["--learning-rate", "0"], "learning_rate must be a finite number > 0, got 0.0"),
        (["--devices", "0"], "devices must be 'auto', a number of devices >= 1 or GPU indices"),
        (["--devices", "two"], "devices must be 'auto', a number of devices >= 1 or GPU indices"),
        (["--accelerator", "tpu"], "unknown accelerator 'tpu'"),
        (["--max-steps", "0"], "max_steps must be an integer >= 1, got 0"),
        (["--max-steps", "-3"], "max_steps must be an integer >= 1, got -3"),
        (["--batch-size", "0"], "batch_size must be an integer >= 1, got 0"),
        (["--val-every", "-1"], "val_every_steps must be an integer >= 1, got -1"),
        (["--precision", "8-bit"], "unknown precision '8-bit'"),
        pytest.param(["--accelerator", "gpu"], "accelerator 'gpu': no CUDA GPU is available",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")),
        pytest.param(["--devices", "2", "--accelerator", "cuda"], "accelerator 'cuda': no CUDA GPU",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")),
        pytest.param(["--precision", "16-mixed"], "precision '16-mixed' needs a GPU",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")),
    ],
)
def test_bad_trainer_options_are_one_line_before_any_work(promoters, tmp_path, capsys, options, message):
    out = tmp_path / "run"
    code = main(["promoter", "finetune", "--data", str(promoters), "--out", str(out), *options])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_bad_pretrain_devices_are_one_line_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--devices", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "devices must be 'auto'" in err and len(err.splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize(
    "device, message",
    [("gpu7", "--device gpu7: not a device name"),
     pytest.param("cuda", "--device cuda: this machine has 0 CUDA GPUs",
                  marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU"))],
)
def test_bad_prediction_device_is_one_line(tmp_path, capsys, device, message):
    fasta = tmp_path / "x.fa"
    fasta.write_text(">x\n" + "ACGT" * 100 + "\n")
    out = tmp_path / "scores.tsv"
    assert main(["predict-promoter", str(fasta), "--out", str(out), "--device", device]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not out.exists()


def test_a_failed_checkpoint_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    """A write that fails half-way (full disk, a kill at the wrong moment) leaves the previous
    ``last.ckpt`` whole and no temporary file."""
    from genolong.training.checkpoints import SafeCheckpointIO, read_checkpoint

    io, last = SafeCheckpointIO(), tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"global_step": 3, "state_dict": {"w": torch.ones(2)}}, last)

    class FullDisk(FileIO):
        def write(self, data):
            super().write(bytes(data)[:10])  # half a checkpoint, then the disk is full
            raise OSError(28, "No space left on device")

    monkeypatch.setattr("genolong.training.checkpoints.open", lambda path, mode: FullDisk(path, mode), raising=False)
    with pytest.raises(OSError, match="No space left"):
        io.save_checkpoint({"global_step": 4, "state_dict": {"w": torch.zeros(2)}}, last)
    assert read_checkpoint(last)["global_step"] == 3
    assert [p.name for p in last.parent.iterdir()] == ["last.ckpt"]
