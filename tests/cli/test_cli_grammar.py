"""The command grammar: noun groups and verbs, the ``predict-promoter`` shortcut, and the deprecated
spellings that still run after one line on stderr."""

from __future__ import annotations

import argparse

import pytest

from genolong.cli.main import DEPRECATED_ALIASES, build_parser, main, resolve_aliases

#: Each deprecated spelling with arguments its parser accepts (nothing is run).
ALIAS_ARGUMENTS = {
    ("finetune", "promoter"): ["--data", "d", "--out", "o"],
    ("finetune", "chromatin"): ["--data", "d", "--out", "o"],
    ("predict-chromatin",): ["in.fa", "--model", "m", "--out", "o.tsv"],
    ("eval", "chromatin"): ["--model", "m", "--data", "d", "--out", "a.csv"],
    ("genome", "fetch"): ["g.fa", "chr1:0-10"],
}


def _words(parser: argparse.ArgumentParser) -> set[str]:
    """The command words a parser offers."""
    return {word for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for word in action.choices}


def _group(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices[name]


def test_every_alias_is_tested_and_maps_to_an_existing_command():
    assert set(ALIAS_ARGUMENTS) == set(DEPRECATED_ALIASES)
    parser = build_parser()
    for new in DEPRECATED_ALIASES.values():
        group, verb = new
        assert verb in _words(_group(parser, group)), new


@pytest.mark.parametrize("old", list(DEPRECATED_ALIASES), ids=" ".join)
def test_an_alias_parses_to_the_same_function_and_arguments_as_the_new_spelling(old, capsys):
    parser = build_parser()
    rest = ALIAS_ARGUMENTS[old]
    through_alias = parser.parse_args(resolve_aliases([*old, *rest]))
    direct = parser.parse_args([*DEPRECATED_ALIASES[old], *rest])
    assert through_alias.func is direct.func
    assert vars(through_alias) == vars(direct)
    new = " ".join(DEPRECATED_ALIASES[old])
    assert capsys.readouterr().err == f"genolong {' '.join(old)}: deprecated, use genolong {new}\n"


def test_global_options_may_come_before_an_alias(capsys):
    assert resolve_aliases(["-v", "genome", "fetch", "g.fa", "chr1"]) == ["-v", "genome", "region", "g.fa", "chr1"]
    assert capsys.readouterr().err.count("deprecated") == 1


def test_current_spellings_and_arguments_equal_to_alias_words_are_left_alone(capsys):
    for argv in (["promoter", "finetune", "--data", "finetune"], ["genome", "region", "fetch", "chr1:0-5"],
                 ["predict-promoter", "eval"], []):
        assert resolve_aliases(argv) == argv
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, line", [
    (["finetune"], "genolong finetune: deprecated, use genolong promoter finetune or genolong chromatin finetune"),
    (["-v", "finetune", "--help"],
     "genolong finetune: deprecated, use genolong promoter finetune or genolong chromatin finetune"),
    (["eval", "promoter"], "genolong eval: deprecated, use genolong chromatin eval"),
])
def test_a_retired_group_without_its_task_names_the_new_spellings(argv, line, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_genome_fetch_runs_genome_region_after_one_deprecation_line(tmp_path, capsys):
    genome = tmp_path / "g.fa"
    genome.write_text(">chrA\nACGTACGTAA\n")
    assert main(["genome", "region", str(genome), "chrA:2-8"]) == 0
    current = capsys.readouterr()
    assert current.out == ">chrA:2-8(+)\nGTACGT\n" and current.err == ""
    assert main(["-v", "genome", "fetch", str(genome), "chrA:2-8"]) == 0
    old = capsys.readouterr()
    assert old.out == current.out
    assert old.err.splitlines() == ["genolong genome fetch: deprecated, use genolong genome region"]


def test_an_alias_with_bad_input_prints_the_deprecation_line_then_one_error_line(tmp_path, capsys):
    assert main(["genome", "fetch", str(tmp_path / "missing.fa"), "chrA:0-4"]) == 2
    deprecation, error = capsys.readouterr().err.splitlines()
    assert deprecation.endswith("deprecated, use genolong genome region")
    assert error.startswith("genolong genome region: error: ") and "missing.fa" in error


def test_help_lists_the_new_grammar_only(capsys):
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    parser = build_parser()
    assert _words(parser) == {
        "data", "genome", "tokenizer", "corpus", "task", "promoter", "chromatin", "pretrain", "convert",
        "compare", "context-ablation", "extrapolate", "bench", "predict-promoter", "scan", "score-variants", "explain",
        "embed", "benchmark",
    }
    for word in _words(parser):
        assert word in top
    for old in ("finetune", "predict-chromatin", "eval "):
        assert old not in top
    assert _words(_group(parser, "promoter")) == {"prepare", "prepare-sources", "baseline", "finetune", "predict"}
    assert _words(_group(parser, "chromatin")) == {"prepare", "finetune", "predict", "eval"}
    assert _words(_group(parser, "genome")) == {"region", "prepare"}
    assert main(["chromatin", "--help"]) == 0
    assert "eval" in capsys.readouterr().out


def test_predict_promoter_is_the_shortcut_of_promoter_predict():
    parser = build_parser()
    shortcut = parser.parse_args(["predict-promoter", "in.fa", "--rc"])
    grouped = parser.parse_args(["promoter", "predict", "in.fa", "--rc"])
    assert shortcut.func is grouped.func

    def options(args):  # without the words that name the command
        return {key: value for key, value in vars(args).items() if not key.endswith(("command", "command_name"))}

    assert options(shortcut) == options(grouped)
    assert (shortcut.command_name, grouped.command_name) == ("predict-promoter", "promoter predict")
