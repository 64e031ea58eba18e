"""Exports carry the pattern: tokenizer.json's Split pre-tokenizer and tiktoken's pat_str (from the run's
bpe_run.json beside the rank file) make HF `tokenizers` and tiktoken give our ids for vocabularies trained
with cl100k, o200k or a custom regex, and in each preset's layout. Each library's tests skip, with the
reason, when it is not installed."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import Tokenizer
from cs336_basics.outputs.export import (
    export_files,
    hf_split_regex,
    hf_tokenizer_json,
    save_tiktoken_ranks,
    tiktoken_encoding,
)
from cs336_basics.outputs.serialization import save_tokenizer
from cs336_basics.rules.pattern import NAMED_PATTERNS, resolve_pattern
from cs336_basics.rules.vocab_layout import assemble_vocab
from tests.test_tokenizer_pattern import CUSTOM, PATTERN_IDS, PATTERNS, SPECIALS, fragment_text, trained, training_text

# Characters every library here classes alike: no surrogates, and only those assigned by this Python's
# Unicode version (the `regex` module's is newer: a character assigned since is a letter to it, and a
# symbol to Oniguruma).
assigned_text = st.text(st.characters(exclude_categories=["Cn", "Cs"]), max_size=60)

# A regex of its own with what Oniguruma reads otherwise: a possessive bounded repeat, `$` and `\Z`.
ONIG_TRAPS = r"\p{N}{1,2}+|\p{L}+(?=\s*\Z)|\p{L}+|\s+$|\s+|[^\s\p{L}\p{N}]+"


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("export-pattern")


@pytest.fixture(scope="module", params=PATTERNS, ids=PATTERN_IDS)
def pattern(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def tokenizers():
    return pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")


@cache
def run_directory(directory: Path, pattern: str, layout: str = "cs336") -> tuple[Path, Tokenizer]:
    """A training run's output with both exports, as the command writes it (pattern and layout in
    bpe_run.json), and the tokenizer it holds."""
    _, merges = trained(pattern, directory)
    vocab = assemble_vocab(SPECIALS, merges, layout)
    resolved = resolve_pattern(pattern)
    out = directory / f"run-{'custom' if pattern == CUSTOM else pattern}-{layout}"
    details = {"pattern": {"name": resolved.name, "regex": resolved.regex}, "layout": layout}
    exports = export_files(["hf", "tiktoken"], vocab, merges, SPECIALS, pattern=pattern)
    save_tokenizer(out, vocab, merges, SPECIALS, details=details, exports=exports)
    return out, Tokenizer(vocab, merges, SPECIALS, pattern=pattern)


# ---------------------------------------------------------------------------------------------
# The regex as HF reads it


def test_split_regex_is_the_patterns_where_oniguruma_reads_it_alike() -> None:
    assert hf_split_regex(NAMED_PATTERNS["gpt2"]) == NAMED_PATTERNS["gpt2"]
    assert hf_split_regex(NAMED_PATTERNS["o200k"]) == NAMED_PATTERNS["o200k"]
    assert hf_split_regex(NAMED_PATTERNS["cl100k"]) == NAMED_PATTERNS["cl100k"].replace(
        r"\p{N}{1,3}+", r"(?>\p{N}{1,3})"
    ).replace("$", r"\Z")
    assert hf_split_regex(r"^(ab){2,3}+[{1}+\]]{1}+x{,2}+\Z$a{}") == r"\A(?>(ab){2,3})(?>[{1}+\]]{1})(?>x{,2})\z\Za{}"


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(fragment_text, assigned_text))
def test_hf_split_finds_our_pre_tokens(text: str) -> None:
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")
    for expression in [*NAMED_PATTERNS.values(), CUSTOM, ONIG_TRAPS]:
        split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(hf_split_regex(expression)), behavior="isolated")
        expected = [match.group() for match in resolve_pattern(expression).compiled.finditer(text)]
        assert [piece for piece, _ in split.pre_tokenize_str(text)] == expected, expression


# ---------------------------------------------------------------------------------------------
# Round trips: the libraries load the exports and give our ids


def test_tokenizer_json_carries_the_pattern(pattern: str, directory: Path) -> None:
    vocab, merges = trained(pattern, directory)
    document = hf_tokenizer_json(vocab, merges, SPECIALS, pattern=pattern)
    split = document["pre_tokenizer"]["pretokenizers"][0]
    assert split["pattern"] == {"Regex": hf_split_regex(resolve_pattern(pattern).regex)}


def test_hf_and_tiktoken_give_our_ids_on_the_training_text(pattern: str, directory: Path, tokenizers) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    run, ours = run_directory(directory, pattern)
    text = training_text(directory)
    expected = ours.encode(text)
    assert tokenizers.Tokenizer.from_file(str(run / "tokenizer.json")).encode(text).ids == expected
    # The rank file holds no pattern: tiktoken_encoding reads it from the run's bpe_run.json.
    encoding = tiktoken_encoding(run / "tokenizer.tiktoken", SPECIALS)
    assert encoding._pat_str == resolve_pattern(pattern).regex
    assert encoding.encode(text, allowed_special="all") == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(fragment_text, assigned_text))
def test_hf_and_tiktoken_give_our_ids_on_generated_text(pattern: str, directory: Path, tokenizers, text: str) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    run, ours = run_directory(directory, pattern)
    expected = ours.encode(text)
    assert tokenizers.Tokenizer.from_file(str(run / "tokenizer.json")).encode(text).ids == expected
    assert tiktoken_encoding(run / "tokenizer.tiktoken", SPECIALS).encode(text, allowed_special="all") == expected


@pytest.mark.parametrize(("like", "pattern", "layout"), [("rustbpe", "cl100k", "rustbpe"), ("hf", "gpt2", "hf")])
def test_each_layout_round_trips(like: str, pattern: str, layout: str, directory: Path, tokenizers) -> None:
    # The special tokens sit where the layout puts them (after the merges; first), in both exports.
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    run, ours = run_directory(directory, pattern, layout)
    text = training_text(directory)
    expected = ours.encode(text)
    special_id = ours.encode(SPECIALS[0])[0]
    assert special_id == (0 if layout == "hf" else len(ours.vocab) - len(SPECIALS))
    assert tokenizers.Tokenizer.from_file(str(run / "tokenizer.json")).encode(text).ids == expected
    assert tiktoken_encoding(run / "tokenizer.tiktoken", SPECIALS).encode(text, allowed_special="all") == expected


def test_a_rank_file_outside_a_run_takes_the_pattern_given(directory: Path) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    vocab, merges = trained("o200k", directory)
    (directory / "alone").mkdir(exist_ok=True)
    path = save_tiktoken_ranks(directory / "alone" / "o200k.tiktoken", vocab, SPECIALS)
    ours = Tokenizer(vocab, merges, SPECIALS, pattern="o200k")
    text = "HelloWorld it'S 1234567!\n\n<|pad|>x"
    assert tiktoken_encoding(path, SPECIALS)._pat_str == NAMED_PATTERNS["gpt2"]  # no run: GPT-2's
    assert tiktoken_encoding(path, SPECIALS, pattern="o200k").encode(text, allowed_special="all") == ours.encode(text)
