"""Encoding with the pattern a vocabulary was trained with: `Tokenizer(..., pattern=)` gives tiktoken's ids
for `Encoding(pat_str=<the pattern's regex>, mergeable_ranks=<ours>)` (built from our own ranks, nothing
downloaded) on the Python path and, for the named patterns, on the compiled encoder; streaming cuts
nowhere a pre-token of the pattern could span, and a training directory's tokenizer carries the
pattern of its bpe_run.json."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import BPEInputError, Tokenizer, bpe_v4
from cs336_basics import tokenizer as tokenizer_module
from cs336_basics.commands.demo import write_demo_corpus
from cs336_basics.commands.report import load_tokenizer_dir
from cs336_basics.outputs.serialization import RUN_FILE, save_tokenizer
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.rules.pattern import GPT2_SPLIT_PATTERN, TOOLS_UNICODE, resolve_pattern
from cs336_basics.rules.splitting import split_on_special_tokens
from cs336_basics.rules.vocab_layout import assemble_vocab

SPECIALS = [ENDOFTEXT, "<|pad|>"]
# A regex of none of the names, with a group: its matches, not the group, are the pre-tokens.
CUSTOM = r"\p{L}+|(\p{N})|\s+|[^\s\p{L}\p{N}]+"
PATTERNS = ["cl100k", "o200k", "rustbpe", CUSTOM]
PATTERN_IDS = ["cl100k", "o200k", "rustbpe", "custom"]
# Which encoder runs: the readable Python one, or the compiled one (named patterns only).
ENCODERS = ["python", "native"]

# What the cl100k and o200k patterns treat apart from GPT-2's: case in contractions and letter runs,
# numbers of more than three digits, newlines after symbols, "/" after symbols, marks, symbols before
# letters, whitespace at the end of a text or before a newline.
FRAGMENTS = [
    "a", "ab", "the", " the", "The", "THE", "HelloWorld", "aBC", "ABCdef", "é", "e\u0301", "\u0301", "Ω", "中文",
    "ки", "😀", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\r", "\u3000", "\xa0", "\x85", "\x0b", "\u2028",
    "0", "42", "1234567", "١٢٣٤", "'", "'s", "'S", "'ll", "'LL", "'Ve", "n't", ".", "!?", "...\n", "/",
    "!/\n", "(", "$", "<", "|", ">", "-", "x", ENDOFTEXT, "<|pad|>", "<|endo", "ftext|>", "\u01c5", "\u02b0",
    "DON'T", "\u0915\u093f", "\n/", "abc\n  ",
]
fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)


@cache
def training_text(directory: Path) -> str:
    path = write_demo_corpus(directory / "demo.txt", 60_000)
    extra = "".join(FRAGMENTS) * 20
    return path.read_text(encoding="utf-8") + ENDOFTEXT + extra


@cache
def trained(pattern: str, directory: Path) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A vocabulary of 600 merges trained with `pattern` (the merge loop does not care which)."""
    compiled = resolve_pattern(pattern).compiled
    counts: Counter[bytes] = Counter()
    for piece in split_on_special_tokens(training_text(directory), SPECIALS):
        counts.update(match.group().encode("utf-8") for match in compiled.finditer(piece))
    merges = bpe_v4.merge(dict(counts), 600)
    return assemble_vocab(SPECIALS, merges), merges


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pattern")


@pytest.fixture(scope="module", params=PATTERNS, ids=PATTERN_IDS)
def pattern(request: pytest.FixtureRequest) -> str:
    return request.param


def tokenizer(pattern: str, directory: Path, **options: object) -> Tokenizer:
    vocab, merges = trained(pattern, directory)
    return Tokenizer(vocab, merges, SPECIALS, pattern=pattern, **options)


@pytest.fixture(scope="module", params=ENCODERS)
def encoder_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@cache
def encoder(pattern: str, directory: Path, kind: str) -> Tokenizer:
    """The tokenizer on the path `kind` names (skipped where that path cannot run the pattern)."""
    if kind == "python":
        return tokenizer(pattern, directory, native=False)
    if not tokenizer_module.native_available():
        pytest.skip("the compiled encoder is not built (or CS336_PURE_PYTHON is set)")
    if not resolve_pattern(pattern).native_encoding:
        pytest.skip("a custom regex encodes on the Python path only")
    return tokenizer(pattern, directory, native=True)


@cache
def tiktoken_encoding(pattern: str, directory: Path):
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[test]'")
    vocab, _ = trained(pattern, directory)
    special_ids = {token: 256 + index for index, token in enumerate(SPECIALS)}  # as assemble_vocab numbers them
    ranks = {token: token_id for token_id, token in vocab.items() if token_id not in special_ids.values()}
    return tiktoken.Encoding(
        "ours", pat_str=resolve_pattern(pattern).regex, mergeable_ranks=ranks, special_tokens=special_ids
    )


# ---------------------------------------------------------------------------------------------
# The ids are tiktoken's


def test_tiktoken_gives_our_ids_on_the_training_text(pattern: str, directory: Path, encoder_kind: str) -> None:
    text = training_text(directory)
    ours = encoder(pattern, directory, encoder_kind).encode(text)
    assert tiktoken_encoding(pattern, directory).encode(text, allowed_special="all") == ours
    assert len(ours) < len(text.encode("utf-8")) / 2  # the merges are in use


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(fragment_text, st.text(max_size=60)))
def test_tiktoken_gives_our_ids_on_generated_text(pattern: str, directory: Path, encoder_kind: str, text: str) -> None:
    encoding = tiktoken_encoding(pattern, directory)
    assert encoding.encode(text, allowed_special="all") == encoder(pattern, directory, encoder_kind).encode(text)


def test_the_patterns_split_differently() -> None:
    # The same text splits otherwise under each: a symbol before letters, digits in threes, contractions
    # of any case, newlines after a symbol, letter runs by case.
    text = "HelloWorld(x) 1234567 it'S!\n\n"
    words = {name: resolve_pattern(name).compiled.findall(text) for name in ("gpt2", "cl100k", "o200k")}
    assert words["gpt2"] == ["HelloWorld", "(", "x", ")", " 1234567", " it", "'", "S", "!", "\n\n"]
    assert words["cl100k"] == ["HelloWorld", "(x", ")", " ", "123", "456", "7", " it", "'S", "!\n\n"]
    assert words["o200k"] == ["Hello", "World", "(x", ")", " ", "123", "456", "7", " it'S", "!\n\n"]


# ---------------------------------------------------------------------------------------------
# Which encoder runs


def test_the_named_patterns_run_natively(directory: Path) -> None:
    for name in ("cl100k", "o200k", "rustbpe"):
        assert tokenizer(name, directory).native == tokenizer_module.native_available()
    assert not tokenizer(CUSTOM, directory).native
    gpt2 = Tokenizer(*trained("gpt2", directory), SPECIALS, pattern=GPT2_SPLIT_PATTERN)
    assert gpt2.pattern.name == "gpt2"
    assert gpt2.native == tokenizer_module.native_available()


def test_native_true_is_refused_for_a_custom_regex(directory: Path) -> None:
    if not tokenizer_module.native_available():
        pytest.skip("the compiled encoder is not built (or CS336_PURE_PYTHON is set)")
    with pytest.raises(BPEInputError, match=r"native=True needs a pattern the compiled encoder runs \(gpt2, cl100k"):
        tokenizer(CUSTOM, directory, native=True)


def test_a_bad_pattern_is_refused_in_one_line(directory: Path) -> None:
    with pytest.raises(BPEInputError, match=r"pattern '\(' is not a valid regular expression"):
        Tokenizer(*trained("gpt2", directory), pattern="(")


def test_pickled_tokenizer_keeps_its_pattern(directory: Path) -> None:
    original = tokenizer("o200k", directory)
    copy = pickle.loads(pickle.dumps(original))
    assert copy.pattern == original.pattern
    assert copy.encode("HelloWorld 1234") == original.encode("HelloWorld 1234")


# ---------------------------------------------------------------------------------------------
# Streaming: cut only where no pre-token of the pattern can span


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fragment_text, extra=fragment_text)
def test_every_cut_splits_no_pre_token_whatever_follows(pattern: str, directory: Path, text: str, extra: str) -> None:
    # Every cut the stream would make in any prefix of the text leaves the pre-tokens of the whole
    # text, with any continuation, as they were.
    encoder = tokenizer(pattern, directory, native=False)
    compiled = resolve_pattern(pattern).compiled
    whole = text + extra

    def words(piece: str) -> list[str]:
        return [match.group() for match in compiled.finditer(piece)]

    for end in range(1, len(text) + 1):
        cut = encoder._last_safe_cut(text[:end])
        pieces = split_on_special_tokens(whole[:cut], SPECIALS) + split_on_special_tokens(whole[cut:], SPECIALS)
        assert [word for piece in pieces for word in words(piece)] == [
            word for piece in split_on_special_tokens(whole, SPECIALS) for word in words(piece)
        ], (text[:end], cut)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fragment_text, cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=12))
def test_encode_iterable_is_encode(pattern: str, directory: Path, text: str, cuts: list[int]) -> None:
    encoder = tokenizer(pattern, directory)
    offsets = sorted({min(cut, len(text)) for cut in cuts})
    items = [text[start:end] for start, end in zip([0, *offsets], [*offsets, len(text)])]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer_module, "_MIN_PIECE_CHARS", 1)
        assert list(encoder.encode_iterable(items)) == encoder.encode(text)


def test_encode_file_cuts_named_patterns_often(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_module, "_MIN_PIECE_CHARS", 64)
    text = training_text(directory)
    path = directory / "training.txt"
    path.write_text(text, encoding="utf-8")
    for name in ("cl100k", "o200k"):
        encoder = tokenizer(name, directory)
        pieces = list(encoder.split_stream([text[start : start + 100] for start in range(0, len(text), 100)]))
        assert "".join(pieces) == text
        assert len(pieces) > len(text) // 200
        assert list(encoder.encode_file(path)) == encoder.encode(text)
    # A custom regex is cut after special tokens only.
    custom = tokenizer(CUSTOM, directory)
    pieces = list(custom.split_stream([text[start : start + 100] for start in range(0, len(text), 100)]))
    assert all(piece.endswith(tuple(SPECIALS)) for piece in pieces[:-1])
    assert list(custom.encode_file(path)) == custom.encode(text)


# ---------------------------------------------------------------------------------------------
# Loading a training directory picks its pattern up


def save_run(directory: Path, pattern: str | None, **fields: object) -> Path:
    vocab, merges = trained(pattern or "gpt2", directory.parent)
    details: dict = dict(fields)
    if pattern is not None:
        resolved = resolve_pattern(pattern)
        details["pattern"] = {"name": resolved.name, "regex": resolved.regex}
    save_tokenizer(directory, vocab, merges, SPECIALS, details=details)
    return directory


@pytest.mark.parametrize("pattern_name", ["cl100k", "o200k", "custom"])
def test_from_files_takes_the_runs_pattern(directory: Path, pattern_name: str) -> None:
    pattern = CUSTOM if pattern_name == "custom" else pattern_name
    run = save_run(directory / f"run-{pattern_name}", pattern)
    loaded = Tokenizer.from_files(run / "vocab.json", run / "merges.txt")
    # A record without a Unicode version (an older run's): tiktoken's encodings class by tiktoken's tables.
    expected = resolve_pattern(pattern)
    if pattern_name != "custom":
        expected = dataclasses.replace(expected, unicode=TOOLS_UNICODE)
    assert loaded.pattern == expected
    text = training_text(directory)[:5000]
    assert loaded.encode(text) == tokenizer(pattern, directory).encode(text)
    assert load_tokenizer_dir(run).pattern == expected
    # An explicit pattern is taken instead, as explicit special tokens are.
    assert Tokenizer.from_files(run / "vocab.json", run / "merges.txt", pattern="gpt2").pattern.name == "gpt2"


def test_a_run_without_a_pattern_is_gpt2(directory: Path) -> None:
    run = save_run(directory / "run-old", None)
    assert "pattern" not in json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
    assert Tokenizer.from_files(run / "vocab.json", run / "merges.txt").pattern.name == "gpt2"
    assert Tokenizer.from_files(run / "vocab.pkl", run / "merges.pkl", check_run=False).pattern.name == "gpt2"


def test_the_recorded_regex_decides(directory: Path) -> None:
    # A name beside a regex that is no longer that name's text: the run trained with the regex.
    run = save_run(directory / "run-renamed", None)
    metadata = json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
    metadata["pattern"] = {"name": "cl100k", "regex": CUSTOM}
    (run / RUN_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    loaded = Tokenizer.from_files(run / "vocab.json", run / "merges.txt")
    assert (loaded.pattern.name, loaded.pattern.regex) == (None, CUSTOM)


@pytest.mark.parametrize(
    ("recorded", "message"),
    [
        ("cl100k", 'pattern must be an object with its "regex"'),
        ({"name": "gpt2"}, 'pattern must be an object with its "regex"'),
        ({"name": 3, "regex": "a"}, "pattern.name must be a string or null"),
        ({"name": None, "regex": "("}, r"pattern '\(' is not a valid regular expression"),
    ],
)
def test_a_damaged_pattern_is_named(directory: Path, recorded: object, message: str) -> None:
    run = save_run(directory / "run-damaged", None)
    metadata = json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
    metadata["pattern"] = recorded
    (run / RUN_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(BPEInputError, match=f"{RUN_FILE} is not a usable .*: {message}"):
        Tokenizer.from_files(run / "vocab.json", run / "merges.txt")
