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


def test_a_movable_checkpoint_keeps_lightnings_state_key_and_re_roots_a_moved_runs_paths(tmp_path):
    """Checkpoints written with Lightning's ModelCheckpoint resume with MovableModelCheckpoint and back
    (same state key); a run directory moved from ``old`` reads its best and last paths under the new one."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from genolong.training.checkpoints import MovableModelCheckpoint

    settings = {"filename": "best", "monitor": "val/score", "mode": "max", "save_top_k": 1, "save_last": True}
    old, new = tmp_path / "old" / "checkpoints", tmp_path / "new" / "checkpoints"
    written = ModelCheckpoint(dirpath=old, **settings)
    written.best_model_score, written.best_model_path = torch.tensor(0.8), str(old / "best.ckpt")
    written.best_k_models, written.last_model_path = {str(old / "best.ckpt"): torch.tensor(0.8)}, str(old / "last.ckpt")
    resumed = MovableModelCheckpoint(dirpath=new, **settings)
    assert resumed.state_key == written.state_key
    resumed.load_state_dict(written.state_dict())
    assert float(resumed.best_model_score) == pytest.approx(0.8)
    assert (resumed.best_model_path, resumed.last_model_path) == (str(new / "best.ckpt"), str(new / "last.ckpt"))
    assert list(resumed.best_k_models) == [str(new / "best.ckpt")]
    in_place = MovableModelCheckpoint(dirpath=old, **settings)
    in_place.load_state_dict(written.state_dict())
    assert in_place.best_model_path == str(old / "best.ckpt") and float(in_place.best_model_score) == pytest.approx(0.8)
