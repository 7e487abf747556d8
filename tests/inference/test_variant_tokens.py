"""Token ids of variant windows without tokenising each window whole (genolong.inference.variants.tokens):
identical to whole-window tokenisation on real sequence, for genolong's BPE and GENA-LM's 32K BPE;
scores identical to the model run on each window's sequence."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.classify import random_classifier, tiny_tokenizer
from helpers.convert import copy_gena_tokenizer
from helpers.variants import genome_sequences, other, site_records
from tokenizers import Tokenizer

from genolong.classifier.directory import StrandAveraged
from genolong.dna.genome import Genome
from genolong.dna.tokenizer import load_tokenizer
from genolong.inference.variants.reader import Variant
from genolong.inference.variants.scoring import ClassifierEffects
from genolong.inference.variants.tokens import SplicingTokenizer, Tokens, WindowInputs, overlapping, strand
from genolong.inference.variants.windows import WindowBuilder
from genolong.resources import sample_genome
from genolong.tasks.task import load_classifier

WINDOW = 2000


class WholeWindow:
    """A crop that keeps every token, so that the bodies are the windows' whole token lists."""

    def kept(self, n_tokens: int, centre: int | None = None) -> slice:
        return slice(0, n_tokens)


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory, real_data):
    """genolong's BPE (64 tokens, trained on the sample genome) and GENA-LM's real 32K BPE."""
    tiny = load_tokenizer(tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")).backend_tokenizer
    gena_dir = tmp_path_factory.mktemp("gena")
    copy_gena_tokenizer(real_data, gena_dir)
    return {"genolong": tiny, "gena_lm": Tokenizer.from_file(str(gena_dir / "tokenizer.json"))}


def real_variants() -> list[Variant]:
    """SNVs every 29 bp of 20 kb of the real chr17 fragment (all three ALTs at every fourth site), an MNV,
    an insertion, a deletion and a variant 10 bp from the end of chrM (a padded window)."""
    chr17 = genome_sequences()["chr17_part"]
    variants = []
    for line, pos in enumerate(range(10_001, 30_001, 29)):
        for step in (1, 2, 3) if line % 4 == 0 else (1 + line % 3,):
            variants.append(Variant("chr17_part", pos, f"s{pos}", chr17[pos - 1], other(chr17[pos - 1], step), line))
    variants.append(Variant("chr17_part", 15_001, "mnv", chr17[15_000:15_003], "".join(map(other, chr17[15_000:15_003])),
                            0))
    variants += [Variant(c, p, i, r, a, 0) for c, p, i, r, a in site_records() if i in ("ins", "del", "end")]
    return variants


@pytest.mark.parametrize("name", ["genolong", "gena_lm"])
@pytest.mark.parametrize("rc", [False, True])
def test_spliced_ids_equal_whole_window_tokenisation_on_real_sequence(tokenizers, name, rc):
    backend = tokenizers[name]
    builder = WindowBuilder(Genome(sample_genome()), WINDOW)
    windows = [builder(v, "test") for v in real_variants()]
    splicing = SplicingTokenizer(backend)
    references, alternatives = WindowInputs(splicing, WholeWindow(), rc).bodies(windows)
    for reverse in (False, True) if rc else (False,):
        whole = {}
        for window in windows:
            for text in (window.ref_window, window.alt_window):
                whole[text] = backend.encode(strand(text, reverse), add_special_tokens=False).ids
        for window in windows:
            assert references[(window.ref_key, reverse)].tolist() == whole[window.ref_window], window.variant
            alternative = alternatives[(window.alt_window, window.centre, reverse)]
            assert alternative.tolist() == whole[window.alt_window], window.variant
    assert len(windows) > 800 and splicing.spliced > len(windows)  # crops and substitutions both spliced
    assert splicing.whole < splicing.spliced / 20  # a seam that is not a valid pair: tokenised whole (rare)


def test_a_crop_or_substitution_with_an_invalid_seam_is_refused(tokenizers):
    """Without the seam check the splice would be wrong: forced here by a tokenizer that sees every pair as invalid."""
    backend = tokenizers["genolong"]
    text = genome_sequences()["chr17_part"][20_000:21_000]
    region = SplicingTokenizer(backend).encode([text])[0]
    refusing = SplicingTokenizer(backend)
    refusing.valid_pair = lambda left, right: False
    assert refusing.cropped(region, text, 100, 900) is None
    assert refusing.substituted(region, text[:500] + other(text[500]) + text[501:], 500, 501) is None
    assert refusing.whole == 2
    with_n = text[:500] + "N" + text[501:]  # a stretch with N is tokenised whole (N runs may be normalised)
    assert SplicingTokenizer(backend).substituted(region, with_n, 500, 501) is None


def test_tokens_by_hand(tokenizers):
    backend = tokenizers["genolong"]
    splicing = SplicingTokenizer(backend, margin=0)
    text = genome_sequences()["chr17_part"][20_000:20_400]
    region = splicing.encode([text])[0]
    assert region.ends[-1] == len(text) and len(region.ids) == len(region.ends)
    cut = splicing.cropped(region, text, 50, 350)
    expected = backend.encode(text[50:350], add_special_tokens=False)
    assert cut == Tokens(expected.ids, [end for _, end in expected.offsets])


def test_overlapping_windows_share_one_region():
    builder = WindowBuilder(Genome(sample_genome()), WINDOW)
    chr17 = genome_sequences()["chr17_part"]
    far = [10_001, 10_501, 30_001]  # two overlapping windows, one 20 kb away
    windows = [builder(Variant("chr17_part", p, ".", chr17[p - 1], other(chr17[p - 1]), 0), "t") for p in far]
    regions = list(overlapping(windows[::-1]))
    assert [[(w.variant.pos, offset) for w, offset in members] for _, members in regions] == [
        [(10_001, 0), (10_501, 500)], [(30_001, 0)]]
    assert regions[0][0] == chr17[10_000 - WINDOW // 2 : 10_500 + WINDOW // 2]


@pytest.mark.parametrize("rc", [False, True])
def test_scores_equal_the_model_on_each_windows_sequence(tokenizers, tmp_path, rc):
    """p_ref and p_alt within 1e-6 of Classifier.probabilities (StrandAveraged with rc) on the window sequences,
    with the same batches: SNVs, an MNV, indels, a multi-allelic site and a padded window."""
    tokenizer_dir = tiny_tokenizer(tmp_path / "tokenizer")
    model = random_classifier(tmp_path / "model", tokenizer_dir, task="chromatin", window_bp=WINDOW, min_bp=WINDOW,
                              label_names=["a", "b", "c"], max_len=96)
    classifier = load_classifier(model, device="cpu")
    builder = WindowBuilder(Genome(sample_genome()), WINDOW)
    every = real_variants()
    multi = [Variant(c, p, i, r, alt, 0) for c, p, i, r, a in site_records() if i == "multi" for alt in a.split(",")]
    variants = every[:-4:12] + every[-4:] + multi
    windows = [builder(v, "test") for v in variants]
    scores = ClassifierEffects(classifier, [0, 1, 2], batch_size=8, rc=rc).score(windows)
    scorer = StrandAveraged(classifier) if rc else classifier
    for name, texts in (("p_ref", [w.ref_window for w in windows]), ("p_alt", [w.alt_window for w in windows])):
        centres = [w.centre for w in windows]
        expected = np.concatenate([scorer.probabilities(texts[i : i + 8], centres[i : i + 8]) for i in range(0, len(texts), 8)])
        np.testing.assert_allclose(scores[name], expected, atol=1e-6, rtol=0)
    assert np.abs(scores["diff"]).max() > 1e-3
