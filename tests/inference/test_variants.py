"""`genolong score-variants` on real hg19 sequence (the shipped chr17 fragment and chrM): hand-made VCFs,
each allele's row or skip count, effects equal to independent predict-* runs, resuming, bad input."""

from __future__ import annotations

import csv
import gzip
import json

import h5py
import numpy as np
import pytest
import torch
from helpers.classify import random_classifier, tiny_tokenizer
from helpers.variants import HEADER, genome_sequences, other, site_records, write_vcf

from genolong.classifier.directory import Classifier, StrandAveraged
from genolong.cli.main import main
from genolong.core.errors import UserError
from genolong.dna.genome import Genome
from genolong.dna.sequence import write_fasta
from genolong.evaluation.profiles import chromatin_profiles
from genolong.inference.labels import select_labels
from genolong.inference.variants.mlm_llr import MaskedLMEffects, differing_span
from genolong.inference.variants.scoring import ClassifierEffects
from genolong.inference.variants.windows import left_normalise
from genolong.resources import sample_genome
from genolong.tasks.task import load_classifier

GENOME = str(sample_genome())
PROFILES = ["GM12878|CTCF|None", "HepG2|CTCF|None", "K562|DNase|None"]
WINDOW = 1000


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")


@pytest.fixture(scope="module")
def chromatin_model(tokenizer_dir, tmp_path_factory):
    return random_classifier(tmp_path_factory.mktemp("m") / "chromatin", tokenizer_dir, task="chromatin",
                             window_bp=WINDOW, min_bp=WINDOW, label_names=PROFILES, max_len=96)


def read_rows(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        lines = handle.read().splitlines()
    meta = {line[2:].split("=", 1)[0]: json.loads(line.split("=", 1)[1]) for line in lines if line.startswith("##")}
    rows = list(csv.DictReader([line for line in lines if not line.startswith("#")], delimiter="\t"))
    return meta, rows


def score(vcf, model, out, *options):
    return main(["score-variants", "--vcf", str(vcf), "--genome", GENOME, "--model", str(model), "--out", str(out),
                 "--chunk-size", "3", "--batch-size", "4", "--accelerator", "cpu", *options])


def ref_alt_windows(pos: int, ref: str, alt: str, chrom: str = "chr17_part") -> tuple[str, str]:
    """The documented windows of a variant, built here from the FASTA text."""
    sequence = genome_sequences()[chrom]
    first = pos - 1 - WINDOW // 2
    reference = sequence[first : first + WINDOW]
    changed = sequence[first : pos - 1] + alt + sequence[pos - 1 + len(ref) :]
    return reference, changed[:WINDOW]


@pytest.mark.parametrize("name", ["in.vcf", "in.vcf.gz"])
def test_each_case_has_its_row_or_skip_count(chromatin_model, tmp_path, capsys, name):
    vcf = write_vcf(tmp_path / name)
    assert score(vcf, chromatin_model, tmp_path / "out.tsv.gz") == 0
    assert "10 alleles, 8 scored" in capsys.readouterr().err
    meta, rows = read_rows(tmp_path / "out.tsv.gz")
    assert meta["counts"] == {"alleles": 10, "scored": 8, "skipped: REF differs from the genome": 1,
                              "skipped: symbolic allele": 1, "flagged: padded": 1}
    assert meta["model_fingerprint"] and meta["genome_fingerprint"] and meta["options"]["ref_mismatch"] == "skip"
    ids = [row["id"] for row in rows[:: len(PROFILES)]]
    assert ids == ["snv1", "snv2", "ins", "del", "multi", "multi", "end", "chrless"]
    assert [row["profile"] for row in rows[:3]] == PROFILES
    by_id = {row["id"]: row for row in rows if row["profile"] == PROFILES[0]}
    assert by_id["end"]["flags"] == "padded" and by_id["end"]["chrom"] == "MT"
    assert {r["flags"] for r in rows if r["id"] != "end"} == {"."}
    multi = [r for r in rows if r["id"] == "multi" and r["profile"] == PROFILES[0]]
    assert [r["alt"] for r in multi] == [site_records()[5][4].split(",")[0], site_records()[5][4].split(",")[1]]
    assert multi[0]["p_ref"] == multi[1]["p_ref"]
    for row in rows:
        diff, logit_diff = float(row["diff"]), float(row["logit_diff"])
        assert diff == pytest.approx(float(row["p_alt"]) - float(row["p_ref"]), abs=2e-6)
        assert float(row["combined"]) == pytest.approx(abs(diff) * abs(logit_diff), rel=1e-4, abs=1e-9)


def test_a_padded_window_keeps_the_tokens_around_the_variant(chromatin_model, tmp_path):
    """10 bp from the end of chrM, 490 bp of N are a few tokens: the window's middle token is far from
    the variant, so the model keeps the tokens centred on the variant's token instead."""
    end = [r for r in site_records() if r[2] == "end"]
    write_vcf(tmp_path / "in.vcf", end)
    assert score(tmp_path / "in.vcf", chromatin_model, tmp_path / "out.tsv") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    mt = genome_sequences()["chrM"]
    _, pos, _, _, alt = end[0]
    first = pos - 1 - WINDOW // 2
    reference = mt[first:] + "N" * (first + WINDOW - len(mt))
    changed = reference[: WINDOW // 2] + alt + reference[WINDOW // 2 + 1 :]
    classifier = Classifier.load(chromatin_model, device="cpu")
    expected = classifier.probabilities([reference, changed], [WINDOW // 2] * 2)
    np.testing.assert_allclose([float(r["p_ref"]) for r in rows], expected[0], atol=2e-6)
    np.testing.assert_allclose([float(r["p_alt"]) for r in rows], expected[1], atol=2e-6)
    assert np.abs(expected[1] - expected[0]).max() > 1e-4
    middle = classifier.probabilities([reference, changed])  # the plain central crop misses the variant
    np.testing.assert_allclose(middle[0], middle[1])
    assert score(tmp_path / "in.vcf", chromatin_model, tmp_path / "rc.tsv", "--rc") == 0
    both = StrandAveraged(classifier).probabilities([reference, changed], [WINDOW // 2] * 2)
    np.testing.assert_allclose([float(r["diff"]) for r in read_rows(tmp_path / "rc.tsv")[1]], both[1] - both[0],
                               atol=2e-6)


def test_alleles_of_one_site_share_the_reference_pass(chromatin_model):
    from genolong.inference.variants.reader import Variant
    from genolong.inference.variants.windows import WindowBuilder

    builder = WindowBuilder(Genome(GENOME), WINDOW)
    sequence = genome_sequences()["chr17_part"]
    alleles = [Variant("chr17_part", 23001, "m", sequence[23000], other(sequence[23000], k), 1) for k in (1, 2, 3)]
    effects = ClassifierEffects(load_classifier(chromatin_model, device="cpu"), [0, 1, 2], batch_size=8)
    scores = effects.score([builder(v, "test") for v in alleles])
    assert effects.forward_passes == 4  # one reference window, three alternatives
    assert scores["p_ref"].shape == (3, 3) and (scores["p_ref"] == scores["p_ref"][0]).all()
    effects.score([builder(alleles[0], "test")])
    assert effects.forward_passes == 6  # nothing is remembered across calls (chunks): a reference, an alternative


def test_snv_diff_equals_two_predict_chromatin_runs(chromatin_model, tmp_path):
    snvs = [r for r in site_records() if r[2] in ("snv1", "snv2", "chrless")]
    write_vcf(tmp_path / "in.vcf", snvs)
    assert score(tmp_path / "in.vcf", chromatin_model, tmp_path / "out.tsv") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    windows = [ref_alt_windows(pos, ref, alt) for _, pos, _, ref, alt in snvs]
    predictions = {}
    for allele, column in (("ref", 0), ("alt", 1)):
        write_fasta(tmp_path / f"{allele}.fa", [(f"v{i}", w[column]) for i, w in enumerate(windows)])
        assert main(["chromatin", "predict", str(tmp_path / f"{allele}.fa"), "--model", str(chromatin_model),
                     "--out", str(tmp_path / f"{allele}.tsv")]) == 0
        predictions[allele] = np.array([[float(r[p]) for p in PROFILES] for r in read_rows(tmp_path / f"{allele}.tsv")[1]])
    expected = predictions["alt"] - predictions["ref"]
    observed = np.array([float(r["diff"]) for r in rows]).reshape(len(snvs), len(PROFILES))
    np.testing.assert_allclose(observed, expected, atol=1.2e-4)
    assert np.abs(expected).max() > 1e-3  # the SNVs do change the random model's outputs


def test_promoter_snv_diff_equals_two_predict_promoter_runs(tokenizer_dir, tmp_path):
    model = random_classifier(tmp_path / "promoter", tokenizer_dir, task="promoter", window_bp=251, min_bp=251,
                              label_names=["promoter"], threshold=0.5)
    sequence = genome_sequences()["chr17_part"]
    snvs = [("chr17_part", pos, f"s{pos}", sequence[pos - 1], other(sequence[pos - 1])) for pos in (5001, 9001, 30001)]
    write_vcf(tmp_path / "in.vcf", snvs)
    assert score(tmp_path / "in.vcf", model, tmp_path / "out.tsv", "--rc") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    probabilities = {}
    for allele, step in (("ref", 0), ("alt", 1)):
        records = [(name, sequence[pos - 1 - 125 : pos - 1] + other(ref, step) + sequence[pos : pos + 125])
                   for _, pos, name, ref, _ in snvs]
        write_fasta(tmp_path / f"{allele}.fa", records)
        assert main(["predict-promoter", str(tmp_path / f"{allele}.fa"), "--model", str(model), "--rc",
                     "--out", str(tmp_path / f"{allele}.tsv")]) == 0
        probabilities[allele] = np.array([float(r["probability"]) for r in read_rows(tmp_path / f"{allele}.tsv")[1]])
    np.testing.assert_allclose([float(r["diff"]) for r in rows], probabilities["alt"] - probabilities["ref"], atol=1.2e-4)
    assert [r["profile"] for r in rows] == ["promoter"] * 3


def test_indel_windows_keep_the_input_length_on_the_right(chromatin_model, tmp_path):
    indels = [r for r in site_records() if r[2] in ("ins", "del")]
    write_vcf(tmp_path / "in.vcf", indels)
    assert score(tmp_path / "in.vcf", chromatin_model, tmp_path / "out.tsv") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    sequence = genome_sequences()["chr17_part"]
    (_, ins_pos, _, _, ins_alt), (_, del_pos, _, del_ref, _) = indels
    # both keep their VCF anchor base: the normalised allele starts at 0-based `pos`, the window's centre
    ins_first, del_first = ins_pos - WINDOW // 2, del_pos - WINDOW // 2
    inserted = ins_alt[1:]
    ins_alt_window = (sequence[ins_first:ins_pos] + inserted + sequence[ins_pos:])[:WINDOW]  # trimmed on the right
    deleted = len(del_ref) - 1
    del_alt_window = sequence[del_first:del_pos] + sequence[del_pos + deleted : del_first + WINDOW + deleted]
    assert len(ins_alt_window) == len(del_alt_window) == WINDOW
    classifier = Classifier.load(chromatin_model, device="cpu")
    expected = classifier.probabilities([ins_alt_window, del_alt_window])
    observed = np.array([float(r["p_alt"]) for r in rows]).reshape(2, len(PROFILES))
    np.testing.assert_allclose(observed, expected, atol=2e-6)


def test_left_normalisation_by_hand(tmp_path):
    write_fasta(tmp_path / "g.fa", [("chrT", "GGACTTTTGACACACAGG")])
    genome = Genome(tmp_path / "g.fa")
    assert left_normalise(genome, "chrT", 7, "TG", "G") == (4, "T", "")  # delete the last T of TTTT -> the first
    assert left_normalise(genome, "chrT", 15, "A", "ACA") == (9, "", "AC")  # insert CA at the end of ACACACA: before it
    assert left_normalise(genome, "chrT", 1, "GA", "GT") == (2, "A", "T")  # SNV written with an anchor base
    assert left_normalise(genome, "chrT", 0, "GG", "G") == (0, "G", "")  # stops at the contig start


def test_hdf5_wide_matrix_matches_the_long_table(chromatin_model, tmp_path):
    vcf = write_vcf(tmp_path / "in.vcf")
    assert score(vcf, chromatin_model, tmp_path / "out.tsv", "--rc") == 0
    assert score(vcf, chromatin_model, tmp_path / "out.h5", "--rc") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    with h5py.File(tmp_path / "out.h5") as h5:
        assert h5["diff"].shape == (8, 3) and [p.decode() for p in h5["profiles"][:]] == PROFILES
        assert [i.decode() for i in h5["id"][:]] == [r["id"] for r in rows[::3]]
        assert list(h5["pos"][:]) == [int(r["pos"]) for r in rows[::3]]
        np.testing.assert_allclose(h5["logit_diff"][:].ravel(), [float(r["logit_diff"]) for r in rows], rtol=1e-5,
                                   atol=1e-6)
        assert json.loads(h5.attrs["provenance"])["options"]["rc"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.vcf", "out.h5", "out.tsv"]


def test_an_interrupted_run_resumes_after_its_last_chunk(chromatin_model, tmp_path, monkeypatch):
    vcf = write_vcf(tmp_path / "in.vcf")
    assert score(vcf, chromatin_model, tmp_path / "whole.tsv") == 0
    calls = []
    real_score = ClassifierEffects.score

    def interrupted(self, windows):
        calls.append(len(windows))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_score(self, windows)

    monkeypatch.setattr(ClassifierEffects, "score", interrupted)
    assert score(vcf, chromatin_model, tmp_path / "out.tsv") == 130
    assert not (tmp_path / "out.tsv").exists()
    done = sorted(p.name for p in (tmp_path / ".out.tsv.partial").glob("part-*.json"))
    assert done == ["part-000000.json", "part-000001.json"]  # two chunks of 3 alleles
    calls.clear()
    monkeypatch.setattr(ClassifierEffects, "score", real_score)
    done = []
    monkeypatch.setattr(ClassifierEffects, "score", lambda self, w: done.append(len(w)) or real_score(self, w))
    # the model reads one strand, so --no-rc is the same run as the default: it resumes
    assert score(vcf, chromatin_model, tmp_path / "out.tsv", "--no-rc") == 0
    assert sum(done) == 3  # only the last 4 alleles (3 scored) ran again
    resumed, whole = read_rows(tmp_path / "out.tsv")[1], read_rows(tmp_path / "whole.tsv")[1]
    assert [r["id"] for r in resumed] == [r["id"] for r in whole]
    np.testing.assert_allclose([float(r["diff"]) for r in resumed], [float(r["diff"]) for r in whole], atol=1e-5)
    assert not (tmp_path / ".out.tsv.partial").exists()


def test_ref_mismatch_policies(chromatin_model, tmp_path, capsys):
    vcf = write_vcf(tmp_path / "in.vcf", [r for r in site_records() if r[2] in ("snv1", "mismatch")])
    assert score(vcf, chromatin_model, tmp_path / "flag.tsv", "--ref-mismatch", "flag") == 0
    capsys.readouterr()
    _, rows = read_rows(tmp_path / "flag.tsv")
    assert [r["flags"] for r in rows[::3]] == [".", "ref_mismatch"]
    assert score(vcf, chromatin_model, tmp_path / "error.tsv", "--ref-mismatch", "error") == 2
    err = capsys.readouterr().err.strip()
    assert "in.vcf:6: REF" in err and "differs from the genome" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "error.tsv").exists() and not (tmp_path / ".error.tsv.partial").exists()


def test_tsv_input_with_chr_less_names_and_a_profile_filter(chromatin_model, tmp_path):
    sequence = genome_sequences()["chr17_part"]
    (tmp_path / "in.tsv").write_text(
        "# hand-made\nchrom\tpos\tref\talt\tid\n"
        f"17_part\t20001\t{sequence[20000]}\t{other(sequence[20000])},{other(sequence[20000], 2)}\ta\n"
        f"chrMT\t100\t{genome_sequences()['chrM'][99]}\tN\n"
    )
    assert score(tmp_path / "in.tsv", chromatin_model, tmp_path / "out.tsv", "--profiles", "CTCF") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    assert [(r["chrom"], r["id"], r["profile"]) for r in rows] == [
        ("17_part", "a", PROFILES[0]), ("17_part", "a", PROFILES[1]), ("17_part", "a", PROFILES[0]),
        ("17_part", "a", PROFILES[1]), ("chrMT", ".", PROFILES[0]), ("chrMT", ".", PROFILES[1])]


def test_profile_selection_on_the_919_deepsea_names():
    names = [p.name for p in chromatin_profiles()]
    assert len(select_labels(names, ["TF"])) == 690 and select_labels(names, ["DHS"]) == list(range(125))
    ctcf = select_labels(names, ["CTCF"])
    assert ctcf and all(names[i].split("|")[1] == "CTCF" for i in ctcf)
    same_name = [i for i, name in enumerate(names) if name == "GM12878|CTCF|None"]  # DeepSEA repeats names
    assert select_labels(names, ["GM12878|CTCF|None"]) == same_name and len(same_name) > 1
    with pytest.raises(UserError, match="matches no output"):
        select_labels(names, ["NOPE"])


def _bad_cases(tmp_path, tokenizer_dir, chromatin_model):
    good = site_records()[0]
    (tmp_path / "pretrained").mkdir()
    (tmp_path / "pretrained" / "config.json").write_text("{}")
    chr17 = HEADER[:1] + ["##contig=<ID=chr17_part,length=83257441>"] + HEADER[2:]
    (tmp_path / "bad.tsv").write_text("chrom\tpos\tref\talt\nchr17_part\t100\tA\n")
    return {
        "short TSV line": (tmp_path / "bad.tsv", chromatin_model, "bad.tsv:2: expected 4 or 5 tab-separated columns"),
        "malformed": (write_vcf(tmp_path / "bad.vcf", [good, ("chr17_part", "12x", ".", "A", "G")]), chromatin_model,
                      "bad.vcf:6: position '12x' is not a 1-based integer"),
        "other build": (write_vcf(tmp_path / "b38.vcf", [good], header=chr17), chromatin_model,
                        "contig chr17_part is 83,257,441 bp in the VCF header but 40,000 bp"),
        "absent contig": (write_vcf(tmp_path / "absent.vcf", [("chr1", 1000, ".", "A", "G")]), chromatin_model,
                          "absent.vcf: none of its contigs is in"),
        "beyond the end": (write_vcf(tmp_path / "end.vcf", [("chrM", 16570, ".", "A", "G")]), chromatin_model,
                           "lies beyond the end of chrM (16,569 bp)"),
        "empty": (write_vcf(tmp_path / "empty.vcf", []), chromatin_model, "empty.vcf: no variants"),
        "not a classifier": (write_vcf(tmp_path / "ok.vcf", [good]), tmp_path / "pretrained",
                             "is a pretrained model, not a fine-tuned classifier"),
    }


def test_bad_input_stops_with_one_line_and_no_output(tokenizer_dir, chromatin_model, tmp_path, capsys):
    for case, (vcf, model, message) in _bad_cases(tmp_path, tokenizer_dir, chromatin_model).items():
        before = sorted(tmp_path.iterdir())
        assert score(vcf, model, tmp_path / "out.tsv") == 2, case
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (case, err)
        assert sorted(tmp_path.iterdir()) == before, case  # nothing written, not even a partial directory


def test_differing_span_by_hand():
    assert differing_span([1, 2, 3, 4], [1, 2, 5, 4]) == (2, 3, 3)  # one token changes
    assert differing_span([1, 2, 3, 4], [1, 6, 7, 8, 4]) == (1, 3, 4)  # two tokens become three
    assert differing_span([1, 1, 1], [1, 1]) == (2, 3, 2)  # a repeat loses a copy


def test_mlm_llr_is_the_masked_marginal_of_the_variant_tokens(tokenizer_dir, tmp_path):
    from genolong.dna.tokenizer import load_tokenizer
    from genolong.model.configuration import GenolongConfig
    from genolong.model.modeling import GenolongForMaskedLM

    tokenizer = load_tokenizer(tokenizer_dir)
    torch.manual_seed(0)
    config = GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=64, initializer_range=0.5)
    GenolongForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    write_vcf(tmp_path / "in.vcf", [r for r in site_records() if r[2] in ("snv1", "ins")])
    assert score(tmp_path / "in.vcf", tmp_path / "mlm", tmp_path / "out.tsv", "--score", "mlm-llr",
                 "--window", "200") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    assert [(r["id"], r["profile"]) for r in rows] == [("snv1", "mlm_llr"), ("ins", "mlm_llr")]
    ref = genome_sequences()["chr17_part"][19900:20100]
    alt = ref[:100] + site_records()[0][4] + ref[101:]
    ids = [tokenizer.backend_tokenizer.encode(s, add_special_tokens=False).ids for s in (ref, alt)]
    start, ref_end, alt_end = differing_span(*ids)
    model = MaskedLMEffects(tmp_path / "mlm", 4, "cpu").model
    expected = 0.0
    for sign, tokens, end in ((-1, ids[0], ref_end), (1, ids[1], alt_end)):
        keep = 62
        first = max(0, min(start - (keep - (end - start)) // 2, len(tokens) - keep))
        masked = [tokenizer.cls_token_id, *tokens[first : first + keep], tokenizer.sep_token_id]
        for i in range(start, end):
            masked[i - first + 1] = tokenizer.mask_token_id
        with torch.no_grad():
            log_p = torch.log_softmax(model(input_ids=torch.tensor([masked])).logits[0], -1)
        expected += sign * sum(float(log_p[i - first + 1, tokens[i]]) for i in range(start, end))
    assert float(rows[0]["llr"]) == pytest.approx(expected, abs=1e-4)


def test_build_check_names_the_builds(tmp_path):
    from genolong.inference.variants.windows import check_build

    write_fasta(tmp_path / "g.fa", [("chr1", "ACGT" * 25), ("chrM", "ACGT" * 10)])
    genome = Genome(tmp_path / "g.fa")
    check_build({"chrM": 40, "chr2": 242_193_529}, genome, "in.vcf")  # same length, or a contig it lacks: fine
    with pytest.raises(UserError, match=r"contig 1 is 248,956,422 bp \(GRCh38\) in the VCF header but 100 bp in"):
        check_build({"1": 248_956_422}, genome, "in.vcf")


def test_annotated_vcf_carries_the_top_effects_of_each_allele(chromatin_model, tmp_path):
    import cyvcf2

    vcf = write_vcf(tmp_path / "in.vcf.gz")
    assert score(vcf, chromatin_model, tmp_path / "out.tsv", "--annotate-vcf", str(tmp_path / "ann.vcf.gz"),
                 "--top-k", "2") == 0
    _, rows = read_rows(tmp_path / "out.tsv")
    expected = {}
    for row in rows:
        expected.setdefault((row["id"], row["alt"]), []).append((float(row["combined"]), row["profile"]))
    records = list(cyvcf2.VCF(str(tmp_path / "ann.vcf.gz")))
    assert [r.ID for r in records] == [r[2] for r in site_records()]  # every record, in order
    annotated = {r.ID: r.INFO.get("GENOLONG") for r in records}
    assert annotated["sym"] is None and annotated["mismatch"] is None  # skipped alleles: no annotation
    for (vid, alt), effects in expected.items():
        entry = next(e for e in annotated[vid].split(",") if e.startswith(f"{alt}:"))
        top = [profile for _, profile in sorted(effects, key=lambda e: -abs(e[0]))[:2]]
        assert [part.rsplit(":", 1)[0] for part in entry[len(alt) + 1 :].split("&")] == top, (vid, entry)
    assert len(annotated["multi"].split(",")) == 2
    assert score(tmp_path / "in.vcf.gz", chromatin_model, tmp_path / "o.tsv", "--annotate-vcf",
                 str(tmp_path / "a.vcf")) == 0
