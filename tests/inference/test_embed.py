"""Embeddings (genolong/inference/embed.py, ``genolong embed``): pooled and per-base vectors of a
model directory's encoder, chosen layers, strand averaging, the HDF5 file the command writes."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from helpers.classify import random_promoter_model, tiny_tokenizer
from helpers.model import probe_attention, tiny_config  # noqa: F401

from genolong.classifier.embedder import Embedder
from genolong.cli.main import main
from genolong.dna.sequence import reverse_complement, write_fasta
from genolong.dna.tokenizer import load_tokenizer
from genolong.model.configuration import GenolongConfig
from genolong.model.loading import save_model
from genolong.model.modeling import GenolongForMaskedLM, GenolongModel

SEQUENCES = ["ACGTTGCAATGGCCATTAGCNNNNACGTAGGATCCA", "TTTTGGGGCCCCAAAATGCATGCA", "GATTACA" * 9]


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory):
    """A random 2-layer MLM model directory over a tiny tokenizer."""
    work = tmp_path_factory.mktemp("embed_model")
    tokenizer = load_tokenizer(tiny_tokenizer(work / "tokenizer"))
    torch.manual_seed(0)
    config = GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=64, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0, initializer_range=0.5)
    save_model(GenolongForMaskedLM(config), tokenizer, work / "model")
    return work / "model"


@pytest.fixture(scope="module")
def embedder(mlm_dir):
    return Embedder.load(mlm_dir, layers=(0, 1, -1), device="cpu")


def test_pooled_mean_is_the_mean_of_the_real_tokens_of_each_layer(embedder):
    pooled = embedder.embed(SEQUENCES)
    assert pooled.shape == (3, 3, 16) and pooled.dtype == np.float32
    for row, sequence in enumerate(SEQUENCES):  # alone, without padding: the plain mean over its tokens
        ids = embedder.tokenizer(sequence)["input_ids"]  # [CLS] tokens [SEP]
        with torch.inference_mode():
            last = embedder.model(torch.tensor([ids])).last_hidden_state[0]  # (T, H)
            tokens = embedder.model.encoder.embeddings(torch.tensor([ids]), None)[0]
        np.testing.assert_allclose(pooled[row, 2], last.mean(dim=0).numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(pooled[row, 0], tokens.mean(dim=0).numpy(), rtol=1e-4, atol=1e-5)
    assert not np.allclose(pooled[:, 1], pooled[:, 2])  # block 1's output is not the last layer's


@pytest.mark.usefixtures("probe_attention")
def test_an_inner_layer_is_the_output_of_the_model_cut_there(embedder):
    """With 2 prepended global tokens and padding to a multiple of 16: block 1's output, per token
    of a padded batch, equals the output of the same weights cut to their first block."""
    torch.manual_seed(0)
    config = tiny_config(backbone="probe", vocab_size=len(embedder.tokenizer), num_hidden_layers=3)
    model = GenolongModel(config).eval()
    probe = Embedder(model, embedder.tokenizer, layers=(1,), device="cpu")
    input_ids, mask, _ = probe._encode(SEQUENCES, ["a", "b", "c"])
    states = probe.hidden_states(input_ids, mask)  # (3, 1, T, H)
    model.encoder.blocks = model.encoder.blocks[:1]
    with torch.inference_mode():
        cut = model(input_ids, mask).last_hidden_state
    real = mask.bool()
    np.testing.assert_allclose(states[:, 0][real], cut[real], rtol=1e-4, atol=1e-5)


def test_cls_pooling_and_layers_out_of_range(mlm_dir, embedder):
    cls = Embedder(embedder.model, embedder.tokenizer, pooling="cls", device="cpu").embed(SEQUENCES[:1])
    with torch.inference_mode():
        last = embedder.model(embedder.tokenizer(SEQUENCES[:1], return_tensors="pt")["input_ids"]).last_hidden_state
    np.testing.assert_allclose(cls[0, 0], last[0, 0].numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(Exception, match="layers 0..2"):
        Embedder.load(mlm_dir, layers=(3,), device="cpu")


def test_both_strands_is_strand_invariant(embedder):
    forward = embedder.embed(SEQUENCES, both_strands=True)
    reverse = embedder.embed([reverse_complement(s) for s in SEQUENCES], both_strands=True)
    np.testing.assert_allclose(forward, reverse, rtol=1e-4, atol=1e-5)
    assert not np.allclose(embedder.embed(SEQUENCES), embedder.embed([reverse_complement(s) for s in SEQUENCES]))
    per_base = embedder.embed(SEQUENCES, per_base=True, both_strands=True)
    per_base_rc = embedder.embed([reverse_complement(s) for s in SEQUENCES], per_base=True, both_strands=True)
    for f, r in zip(per_base, per_base_rc, strict=True):
        np.testing.assert_allclose(f, r[:, ::-1], rtol=1e-4, atol=1e-5)


def test_per_base_gives_each_base_its_token_vector(embedder):
    per_base = embedder.embed(SEQUENCES, per_base=True)
    pooled_states = embedder.hidden_states(*embedder._encode(SEQUENCES, ["a", "b", "c"])[:2])
    for row, (sequence, vectors) in enumerate(zip(SEQUENCES, per_base, strict=True)):
        assert vectors.shape == (3, len(sequence), 16)
        offsets = embedder.encode.backend.encode(sequence, add_special_tokens=False).offsets
        assert any(end - start > 1 for start, end in offsets)  # some token covers several bases
        for token, (start, end) in enumerate(offsets):
            for base in range(start, end):
                np.testing.assert_array_equal(vectors[:, base], pooled_states[row, :, token + 1].numpy())


def test_a_classifier_directory_embeds_too(tmp_path_factory):
    classifier = random_promoter_model(tmp_path_factory, window_bp=251)
    assert Embedder.load(classifier, device="cpu").embed(SEQUENCES).shape == (3, 1, 16)


def test_command_writes_hdf5_and_refuses_bad_input(mlm_dir, tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, [(f"s{i}", s) for i, s in enumerate(SEQUENCES)])
    out = tmp_path / "emb.h5"
    assert main(["embed", str(fasta), "--model", str(mlm_dir), "--out", str(out), "--layers", "1", "-1",
                 "--batch-size", "2", "--precision", "32"]) == 0
    expected = Embedder.load(mlm_dir, layers=(1, -1), device="cpu").embed(SEQUENCES)
    with h5py.File(out) as handle:
        assert [i.decode() for i in handle["ids"][:]] == ["s0", "s1", "s2"]
        np.testing.assert_allclose(handle["embeddings"][:], expected, rtol=1e-4, atol=1e-5)
        assert list(handle.attrs["layers"]) == [1, 2]
    csv = tmp_path / "in.csv"
    csv.write_text("id,sequence\n" + "".join(f"r{i},{s}\n" for i, s in enumerate(SEQUENCES)))
    per_base = tmp_path / "per_base.h5"
    assert main(["embed", str(csv), "--model", str(mlm_dir), "--out", str(per_base), "--per-base",
                 "--both-strands", "--precision", "32"]) == 0
    with h5py.File(per_base) as handle:
        assert [handle["per_base"][str(i)].shape for i in range(3)] == [(1, len(s), 16) for s in SEQUENCES]
        assert [handle["per_base"][str(i)].attrs["id"] for i in range(3)] == ["r0", "r1", "r2"]
    capsys.readouterr()
    bad = tmp_path / "bad.fa"
    bad.write_text(">x\nACGTQ\n")
    status = main(["embed", str(bad), "--model", str(mlm_dir), "--out", str(tmp_path / "bad.h5")])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("precision:")]
    assert status == 2 and len(err) == 1 and "bad.fa:2 (record 'x')" in err[0]
    assert not list(tmp_path.glob("*bad.h5*"))  # neither the file nor its temporary
    long = tmp_path / "long.fa"
    write_fasta(long, [("ok", "ACGT" * 5), ("long", "ACGT" * 200)])
    status = main(["embed", str(long), "--model", str(mlm_dir), "--out", str(tmp_path / "long.h5")])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("precision:")]
    assert status == 2 and len(err) == 1 and "long.fa (record 'long')" in err[0] and "more than the model's" in err[0]
    assert not list(tmp_path.glob("*long.h5*"))


def test_bed_regions_on_a_genome_embed_as_task_prepare_reads_them(mlm_dir, real_data, tmp_path, capsys):
    """--bed --genome --length N: N bp centred on each region (the middle base at N // 2), ids from the
    name column or chrom:start-end; without --length the region itself; a region off the chromosome
    is one line naming the BED file and line, and nothing is written."""
    genome = real_data / "genomes" / "chr17.hg19.part.fa"
    chr17 = genome.read_text().split("\n", 1)[1].replace("\n", "").upper()
    bed = tmp_path / "regions.bed"
    bed.write_text("chr17\t100\t141\tenh1\nchr17\t1000\t1030\t.\n# a comment\nchr17\t2000\t2050\n")
    expected_ids = ["enh1", "chr17:1000-1030", "chr17:2000-2050"]
    centred = [chr17[c - 20 : c + 20] for c in (120, 1015, 2025)]
    regions = [chr17[100:141], chr17[1000:1030], chr17[2000:2050]]
    embedder = Embedder.load(mlm_dir, device="cpu")
    for extra, sequences, name in ((["--length", "40"], centred, "centred.h5"), ([], regions, "regions.h5")):
        out = tmp_path / name
        assert main(["embed", "--regions", str(bed), "--genome", str(genome), *extra, "--model", str(mlm_dir),
                     "--out", str(out), "--precision", "32"]) == 0
        with h5py.File(out) as handle:
            assert [i.decode() for i in handle["ids"][:]] == expected_ids
            np.testing.assert_allclose(handle["embeddings"][:], embedder.embed(sequences), rtol=1e-4, atol=1e-5)
    capsys.readouterr()
    off = tmp_path / "off.bed"
    off.write_text("chr17\t100\t141\nchr17\t39950\t40100\n")
    status = main(["embed", "--regions", str(off), "--genome", str(genome), "--model", str(mlm_dir),
                   "--out", str(tmp_path / "off.h5")])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("precision:")]
    assert status == 2 and len(err) == 1 and "off.bed:2" in err[0] and "off the chromosome" in err[0], err
    assert not list(tmp_path.glob("*off.h5*"))
    assert main(["embed", "--regions", str(off), "--model", str(mlm_dir), "--out", str(tmp_path / "x.h5")]) == 2
    assert "--regions with --genome" in capsys.readouterr().err
