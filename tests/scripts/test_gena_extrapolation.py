"""``benchmarks/gena_extrapolation.py`` at tiny scale: a GENA-LM-format pre-LN checkpoint (their real
config scaled to 1 layer, hidden 64, and their tokenizer) converted by the CLI, briefly trained and
measured by ``genolong extrapolate`` at 512 and 2,048 tokens on the real yeast chromosome I."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gena_extrapolation.py"


@pytest.mark.slow
def test_the_gena_style_extrapolation_runs_end_to_end(shared_data, tmp_path):
    spec = importlib.util.spec_from_file_location("gena_extrapolation", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "run"
    assert script.main(["--shared-data", str(shared_data), "--out", str(out), "--genome",
                        str(shared_data / "genomes" / "yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa"),
                        "--layers", "1", "--hidden", "64", "--intermediate", "128", "--pretrain-steps", "2",
                        "--finetune-steps", "1", "--eval-tokens", "1000"]) == 0
    source = json.loads((out / "gena_src" / "config.json").read_text())
    assert source["pre_layer_norm"] and source["vocab_size"] == 32000 and source["hidden_size"] == 64
    full = json.loads((out / "gena_full" / "config.json").read_text())
    assert full["pre_layer_norm"] and full["final_layer_norm"]  # read from the weights: last_layer_ln
    for backbone in ("lsg", "bigbird", "longformer"):
        converted = json.loads((out / f"gena_{backbone}" / "config.json").read_text())
        assert converted["max_position_embeddings"] == 2048 and converted["trained_positions"] == 512
    report = json.loads((out / "extrapolation" / "extrapolation.json").read_text())
    assert report["lengths"] == [512, 2048] and len(report["rows"]) == 1 + 5 * 2 * 2
    source_bpc = next(r["bpc"] for r in report["rows"] if r["stage"] == "trained")
    for row in report["rows"]:
        if row["stage"] == "converted" and row["length"] == 512 and row["backbone"] != "sled":  # patterns cover 512
            assert row["bpc"] == pytest.approx(source_bpc, abs=1e-5), row["backbone"]
