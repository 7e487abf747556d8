"""A ``tokenizer.json`` for Nucleotide Transformer's ``vocab.txt``-only ``EsmTokenizer`` (v1 and
v2), which transformers cannot convert; token ids tested identical on real genome sequence.

* ``EsmTokenizer`` splits the text at the longest vocabulary entry that starts at the leftmost
  position (a trie), then on whitespace; anything else is ``<unk>``. Here: a whitespace split, a
  regular expression matching the longest entry (:func:`longest_match_pattern`), each match and
  each unmatched run its own piece, and a ``WordLevel`` model of the same vocabulary.
* ``<cls> sequence <eos>`` around the tokens, as ``build_inputs_with_special_tokens`` does (v1);
  ``<eos>`` is also the separator genolong's encoders append (ESM has no ``sep_token``). Without
  ``eos_token`` (v2) ``<cls>`` only is prepended; genolong's encoders still end inputs with ``<eos>``.

:func:`check_readable` refuses, before anything is written, a tokenizer genolong's commands
would refuse later (a WordPiece k-mer vocabulary reads only DNA pre-split into k-mers).
"""

from __future__ import annotations

import json
import re

from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
from transformers import EsmTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from genolong.convert.source import ConversionError
from genolong.dna.tokenizer import check_tokenizer_model

#: The separator genolong's commands append to an ESM input whose tokenizer appends none.
ESM_SEPARATOR = "<eos>"


def fast_tokenizer(slow: PreTrainedTokenizerBase) -> PreTrainedTokenizerFast:
    """``slow`` as a fast tokenizer with the same ids (``slow`` itself when it is one already);
    ConversionError for a Python-only class other than ``EsmTokenizer``."""
    if slow.is_fast:
        return slow
    if not isinstance(slow, EsmTokenizer):
        raise ConversionError(
            f"the tokenizer is a {type(slow).__name__} without tokenizer.json; genolong needs a fast tokenizer "
            "and builds one only for EsmTokenizer (Nucleotide Transformer)"
        )
    vocab = slow.get_vocab()
    special = set(slow.all_special_tokens)
    entries = [token for token in vocab if token not in special]
    backend = Tokenizer(models.WordLevel(vocab, unk_token=slow.unk_token))
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(longest_match_pattern(entries)), behavior="isolated"),
    ])
    cls, eos = slow.cls_token, slow.eos_token
    if eos is None and ESM_SEPARATOR not in vocab:
        raise ConversionError(f"the EsmTokenizer has no eos_token and no {ESM_SEPARATOR} in its vocabulary: genolong's "
                              "commands end every input with a separator")
    if eos is None:  # Nucleotide Transformer: <cls> tokens, nothing appended
        backend.post_processor = processors.TemplateProcessing(single=f"{cls} $A",
                                                               special_tokens=[(cls, vocab[cls])])
    else:
        backend.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {eos}", pair=f"{cls} $A {eos} $B {eos}",
            special_tokens=[(cls, vocab[cls]), (eos, vocab[eos])],
        )
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=slow.unk_token, cls_token=cls,
                                   pad_token=slow.pad_token, mask_token=slow.mask_token, eos_token=eos,
                                   sep_token=eos or ESM_SEPARATOR, model_max_length=slow.model_max_length)


def check_readable(src, tokenizer: PreTrainedTokenizerFast) -> None:
    """ConversionError unless genolong's commands read ``tokenizer`` (the source ``src``'s), as
    :func:`~genolong.dna.tokenizer.check_tokenizer_model` states."""
    try:
        check_tokenizer_model(tokenizer)
    except ValueError:
        kind = json.loads(tokenizer.backend_tokenizer.to_str())["model"].get("type")
        raise ConversionError(
            f"{src}: its tokenizer is a {kind} model, which genolong's commands do not read (they read BPE tables "
            "and word-level vocabularies)", hint="a WordPiece k-mer vocabulary needs the DNA pre-split into k-mers; "
            "convert a checkpoint with a BPE tokenizer (GENA-LM) or Nucleotide Transformer's vocab.txt") from None


def longest_match_pattern(entries: list[str]) -> str:
    """A regular expression matching the longest of ``entries`` that starts where it is tried:
    their prefix trie with greedy continuations, e.g. ``["A", "AC", "G"]`` -> ``(?:A(?:C)?|G)``
    (an alternation of 4,000 6-mers would be tried one by one at every position)."""
    trie: dict = {}
    for entry in entries:
        node = trie
        for char in entry:
            node = node.setdefault(char, {})
        node[""] = {}  # the end of an entry
    return _pattern(trie)


def _pattern(node: dict) -> str:
    branches = [re.escape(char) + _continuation(child) for char, child in node.items() if char]
    return "(?:" + "|".join(branches) + ")"


def _continuation(node: dict) -> str:
    if set(node) == {""}:
        return ""
    return _pattern(node) + ("?" if "" in node else "")
